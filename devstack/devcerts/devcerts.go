// Package devcerts makes the TLS material of a development or test
// deployment: a certificate authority, and certificates it signs for the
// hosts of the deployment, each good for serving and for client
// authentication (as Gazette's peers present one certificate both ways).
//
// It is for development stacks and tests; production deployments bring
// their own PKI.
package devcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// validity of the certificates made.
const validity = 365 * 24 * time.Hour

// CA is a certificate authority.
type CA struct {
	// CertFile is the PEM file of the CA's certificate: the file that
	// --*.trusted-ca-file and --*.server-ca-file flags name.
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
}

// Pair is the PEM files of a certificate and its private key.
type Pair struct {
	CertFile, KeyFile string
}

// NewCA makes a certificate authority named name, writing its certificate
// to dir/<name>-ca.pem (its key stays in memory).
func NewCA(dir, name string) (*CA, error) {
	var key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("devcerts: generating the key of CA %s: %w", name, err)
	}
	var tmpl = &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name + " CA", Organization: []string{"gazconsumer development"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("devcerts: making CA %s: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	var ca = &CA{CertFile: filepath.Join(dir, name+"-ca.pem"), cert: cert, key: key}
	if err = writePEM(ca.CertFile, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	return ca, nil
}

// Issue makes a certificate named name for hosts (IP addresses or DNS
// names), signed by the CA and good for both server and client
// authentication, and writes it and its key to dir/<name>.pem and
// dir/<name>-key.pem.
func (ca *CA) Issue(dir, name string, hosts ...string) (Pair, error) {
	if len(hosts) == 0 {
		return Pair{}, errors.New("devcerts: a certificate needs at least one host")
	}
	var key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, fmt.Errorf("devcerts: generating the key of %s: %w", name, err)
	}
	var tmpl = &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: name, Organization: []string{"gazconsumer development"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, fmt.Errorf("devcerts: issuing %s: %w", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	var p = Pair{CertFile: filepath.Join(dir, name+".pem"), KeyFile: filepath.Join(dir, name+"-key.pem")}
	if err = writePEM(p.CertFile, "CERTIFICATE", der, 0o644); err != nil {
		return Pair{}, err
	}
	if err = writePEM(p.KeyFile, "PRIVATE KEY", keyDER, 0o600); err != nil {
		return Pair{}, err
	}
	return p, nil
}

// LoadOrNewCA loads the CA named name from dir (dir/<name>-ca.pem and its
// key, dir/<name>-ca-key.pem) if both exist, or makes one and writes both:
// certificates it issues stay trusted by clients of an earlier run.
func LoadOrNewCA(dir, name string) (*CA, error) {
	var certFile, keyFile = filepath.Join(dir, name+"-ca.pem"), filepath.Join(dir, name+"-ca-key.pem")
	var certPEM, cerr = os.ReadFile(certFile)
	var keyPEM, kerr = os.ReadFile(keyFile)
	if errors.Is(cerr, os.ErrNotExist) || errors.Is(kerr, os.ErrNotExist) {
		var ca, err = NewCA(dir, name)
		if err != nil {
			return nil, err
		}
		der, err := x509.MarshalPKCS8PrivateKey(ca.key)
		if err != nil {
			return nil, err
		}
		if err = writePEM(keyFile, "PRIVATE KEY", der, 0o600); err != nil {
			return nil, err
		}
		return ca, nil
	} else if cerr != nil || kerr != nil {
		return nil, fmt.Errorf("devcerts: reading CA %s: %w", name, errors.Join(cerr, kerr))
	}
	var cb, kb = decodePEM(certPEM), decodePEM(keyPEM)
	if cb == nil || kb == nil {
		return nil, fmt.Errorf("devcerts: %s or %s is not PEM", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(cb)
	if err != nil {
		return nil, fmt.Errorf("devcerts: %s: %w", certFile, err)
	}
	key, err := x509.ParsePKCS8PrivateKey(kb)
	if err != nil {
		return nil, fmt.Errorf("devcerts: %s: %w", keyFile, err)
	}
	ecKey, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("devcerts: %s holds a %T, not an ECDSA key", keyFile, key)
	}
	if time.Now().After(cert.NotAfter.Add(-24 * time.Hour)) {
		// About to expire: make a new one.
		_ = os.Remove(certFile)
		_ = os.Remove(keyFile)
		return LoadOrNewCA(dir, name)
	}
	return &CA{CertFile: certFile, cert: cert, key: ecKey}, nil
}

func decodePEM(b []byte) []byte {
	if block, _ := pem.Decode(b); block != nil {
		return block.Bytes
	}
	return nil
}

func serial() *big.Int {
	var n, _ = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return n
}

func writePEM(path, kind string, der []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("devcerts: %w", err)
	}
	var b = pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der})
	if err := os.WriteFile(path, b, mode); err != nil {
		return fmt.Errorf("devcerts: writing %s: %w", path, err)
	}
	return nil
}
