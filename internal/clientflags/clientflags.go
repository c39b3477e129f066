// Package clientflags holds the flags by which a command reaches a Gazette
// deployment's etcd and brokers, named as Gazette's members and gazctl name
// them (--etcd.address, --etcd.prefix, --broker.address, their TLS and the
// brokers' authorization, with the same environment variables), and builds
// the clients they describe.
package clientflags

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/server"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/internal/fragstores"
)

// Flags reach etcd and the brokers of a deployment.
type Flags struct {
	// Etcd: comma-separated endpoints, TLS of https:// endpoints, and the
	// prefix of a consumer group's keys.
	EtcdAddress                                            string
	EtcdCertFile, EtcdCertKeyFile, EtcdTrustedCAFile       string
	EtcdPrefix                                             string
	BrokerAddress                                          string
	BrokerCertFile, BrokerCertKeyFile, BrokerTrustedCAFile string
	// BrokerAuthKeys sign requests to brokers; BrokerAuthToken is a bearer
	// token sent instead.
	BrokerAuthKeys, BrokerAuthToken string
	// FileRoot roots file:// fragment stores.
	FileRoot string
}

// Register adds the flags to fs, with defaults from the environment.
func (f *Flags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.EtcdAddress, "etcd.address", env("ETCD_ADDRESS", "http://localhost:2379"), "etcd endpoints, comma-separated (env ETCD_ADDRESS)")
	fs.StringVar(&f.EtcdCertFile, "etcd.cert-file", env("ETCD_CERT_FILE", ""), "path to the client TLS certificate for etcd (env ETCD_CERT_FILE)")
	fs.StringVar(&f.EtcdCertKeyFile, "etcd.cert-key-file", env("ETCD_CERT_KEY_FILE", ""), "path to the client TLS private key for etcd (env ETCD_CERT_KEY_FILE)")
	fs.StringVar(&f.EtcdTrustedCAFile, "etcd.trusted-ca-file", env("ETCD_TRUSTED_CA_FILE", ""), "path to the CA that etcd's server certificates must be signed by (env ETCD_TRUSTED_CA_FILE)")
	fs.StringVar(&f.EtcdPrefix, "etcd.prefix", env("ETCD_PREFIX", ""), "etcd prefix of the consumer group, e.g. /gazette/consumers/ledger (env ETCD_PREFIX)")
	fs.StringVar(&f.BrokerAddress, "broker.address", env("BROKER_ADDRESS", "http://localhost:8080"), "Gazette broker endpoint (env BROKER_ADDRESS)")
	fs.StringVar(&f.BrokerCertFile, "broker.cert-file", env("BROKER_CERT_FILE", ""), "path to the client TLS certificate for brokers (env BROKER_CERT_FILE)")
	fs.StringVar(&f.BrokerCertKeyFile, "broker.cert-key-file", env("BROKER_CERT_KEY_FILE", ""), "path to the client TLS private key for brokers (env BROKER_CERT_KEY_FILE)")
	fs.StringVar(&f.BrokerTrustedCAFile, "broker.trusted-ca-file", env("BROKER_TRUSTED_CA_FILE", ""), "path to the CA that brokers' server certificates must be signed by (env BROKER_TRUSTED_CA_FILE)")
	fs.StringVar(&f.BrokerAuthKeys, "broker.auth-keys", env("BROKER_AUTH_KEYS", ""), "whitespace- or comma-separated base64 keys; the first signs the authorization tokens of requests to brokers (env BROKER_AUTH_KEYS)")
	fs.StringVar(&f.BrokerAuthToken, "broker.auth-token", env("BROKER_AUTH_TOKEN", ""), "bearer token of requests to brokers, if not signed with --broker.auth-keys (env BROKER_AUTH_TOKEN)")
	fs.StringVar(&f.FileRoot, "broker.file-root", env("BROKER_FILE_ROOT", ""), "filesystem path which roots the brokers' file:// fragment stores (env BROKER_FILE_ROOT)")
}

// Etcd returns a client of the etcd cluster f names; the caller closes it.
func (f Flags) Etcd() (*clientv3.Client, error) {
	var endpoints = Endpoints(f.EtcdAddress)
	if len(endpoints) == 0 {
		return nil, errors.New("--etcd.address: no endpoint")
	}
	var tlsConfig *tls.Config
	if f.EtcdCertFile != "" || f.EtcdTrustedCAFile != "" || strings.Contains(f.EtcdAddress, "https://") {
		var err error
		if tlsConfig, err = BuildTLS("etcd.cert-file", "etcd.cert-key-file", f.EtcdCertFile, f.EtcdCertKeyFile, f.EtcdTrustedCAFile); err != nil {
			return nil, err
		}
	}
	var c, err = clientv3.New(clientv3.Config{Endpoints: endpoints, TLS: tlsConfig, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("connecting to etcd %s: %w", f.EtcdAddress, err)
	}
	return c, nil
}

// BrokerSecurity returns the TLS and authorization of requests to brokers
// that f configures.
func (f Flags) BrokerSecurity() (brokerconn.Security, error) {
	var sec brokerconn.Security
	var err error
	if sec.TLS, err = BuildTLS("broker.cert-file", "broker.cert-key-file", f.BrokerCertFile, f.BrokerCertKeyFile, f.BrokerTrustedCAFile); err != nil {
		return sec, err
	}
	sec.Auth, err = BrokerAuth(f.BrokerAuthKeys, f.BrokerAuthToken)
	return sec, err
}

// Brokers returns a journal client of the brokers f names, and the
// connection to close when done. Fragment stores are registered (rooted at
// --broker.file-root), so that the process may read and remove fragments.
func (f Flags) Brokers() (pb.RoutedJournalClient, *grpc.ClientConn, error) {
	var ep = pb.Endpoint(f.BrokerAddress)
	if err := ep.Validate(); err != nil {
		return nil, nil, fmt.Errorf("--broker.address: %w", err)
	}
	var sec, err = f.BrokerSecurity()
	if err != nil {
		return nil, nil, err
	}
	fragstores.Register(f.FileRoot)
	brokerconn.RegisterDispatcher("")
	return brokerconn.DialSecure(ep, pb.NoopDispatchRouter{}, sec)
}

// BrokerAuth returns what authorizes requests to brokers: tokens signed with
// the first of keys, or else the bearer token, or else nil.
func BrokerAuth(keys, token string) (pb.Authorizer, error) {
	return authOf("broker.auth-keys", keys, token)
}

// authOf returns tokens signed with the first of keys, or else the bearer
// token, or else nil, naming keysFlag in its error.
func authOf(keysFlag, keys, token string) (pb.Authorizer, error) {
	switch {
	case keys != "":
		var a, err = auth.NewKeyedAuth(keys)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", keysFlag, err)
		}
		return a, nil
	case token != "":
		return auth.NewBearerAuth(token), nil
	}
	return nil, nil
}

// BuildTLS builds the TLS configuration of a certificate, its key and a CA,
// as Gazette's commands do, naming the flags certFlag and keyFlag in its
// errors.
func BuildTLS(certFlag, keyFlag, cert, key, ca string) (*tls.Config, error) {
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("--%s and --%s go together: one is set, the other is not", certFlag, keyFlag)
	}
	var c, err = server.BuildTLSConfig(cert, key, ca)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", certFlag, err)
	}
	return c, nil
}

// Endpoints returns the endpoints of a comma-separated list, trimmed, the
// empty ones left out.
func Endpoints(list string) []string {
	var out []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func env(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}

// MemberFlags reach the members of consumer groups, named as gazctl's
// --consumer.* flags (with the same environment variables): the client
// certificate presented to members serving mutual TLS, the CA their
// certificates are signed by, and the keys signing the authorization of
// calls.
type MemberFlags struct {
	CertFile, CertKeyFile, TrustedCAFile string
	// AuthKeys sign calls to members; AuthToken is a bearer token sent
	// instead.
	AuthKeys, AuthToken string
}

// Register adds the flags to fs, with defaults from the environment.
func (f *MemberFlags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.CertFile, "consumer.cert-file", env("CONSUMER_CERT_FILE", ""), "path to the client TLS certificate for members (env CONSUMER_CERT_FILE)")
	fs.StringVar(&f.CertKeyFile, "consumer.cert-key-file", env("CONSUMER_CERT_KEY_FILE", ""), "path to the client TLS private key for members (env CONSUMER_CERT_KEY_FILE)")
	fs.StringVar(&f.TrustedCAFile, "consumer.trusted-ca-file", env("CONSUMER_TRUSTED_CA_FILE", ""), "path to the CA that members' server certificates must be signed by (env CONSUMER_TRUSTED_CA_FILE)")
	fs.StringVar(&f.AuthKeys, "consumer.auth-keys", env("CONSUMER_AUTH_KEYS", ""), "whitespace- or comma-separated base64 keys; the first signs the authorization tokens of calls to members (env CONSUMER_AUTH_KEYS)")
	fs.StringVar(&f.AuthToken, "consumer.auth-token", env("CONSUMER_AUTH_TOKEN", ""), "bearer token of calls to members, if not signed with --consumer.auth-keys (env CONSUMER_AUTH_TOKEN)")
}

// Security returns the TLS and authorization of calls to members that f
// configures.
func (f MemberFlags) Security() (brokerconn.Security, error) {
	var sec brokerconn.Security
	var err error
	if sec.TLS, err = BuildTLS("consumer.cert-file", "consumer.cert-key-file", f.CertFile, f.CertKeyFile, f.TrustedCAFile); err != nil {
		return sec, err
	}
	sec.Auth, err = authOf("consumer.auth-keys", f.AuthKeys, f.AuthToken)
	return sec, err
}
