// Package runconsumer runs a consumer application as a member of its
// consumer group, configured as Gazette's own consumers are (its
// mainboilerplate/runconsumer): the same flags and environment variables for
// etcd, the brokers, the member's server, TLS and authorization.
//
// A consumer's command is usually just
//
//	func main() {
//		runconsumer.Main("ledger", func(d runconsumer.Deps) (runtime.Application, error) {
//			return bankv1.NewLedgerApplication(ledger.NewLedgerHandler(), rocks.Opener{}, d.Partitions)
//		})
//	}
package runconsumer

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/internal/logrusslog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
	"github.com/gazconsumer/gazconsumer/runtime/service"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/auth"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/server"
	"go.uber.org/zap"
)

// Flags are the settings of a consumer binary. Their flag and environment
// names are those of Gazette's own consumers (`--etcd.address` or
// ETCD_ADDRESS, `--broker.cert-file` or BROKER_CERT_FILE,
// `--consumer.auth-keys` or CONSUMER_AUTH_KEYS, ...), so deployments
// configure either the same way.
type Flags struct {
	// Etcd: comma-separated endpoints, TLS of https:// endpoints.
	EtcdAddress                                            string
	EtcdCertFile, EtcdCertKeyFile, EtcdTrustedCAFile       string
	EtcdPrefix                                             string
	EtcdLeaseTTL                                           time.Duration
	BrokerAddress                                          string
	BrokerCertFile, BrokerCertKeyFile, BrokerTrustedCAFile string
	// BrokerAuthKeys sign the member's requests to brokers; BrokerAuthToken
	// is a bearer token sent instead.
	BrokerAuthKeys, BrokerAuthToken string
	BrokerCacheSize                 int
	FileRoot                        string
	Zone, ID                        string
	Host, Port                      string
	// Server TLS of the member's port (a CA makes client certificates
	// required), and the peer certificate of its calls to members.
	ServerCertFile, ServerCertKeyFile, ServerCAFile string
	PeerCertFile, PeerCertKeyFile, PeerCAFile       string
	// AuthKeys verify the authorization of calls of the member's gRPC
	// services (the Shard API and the application's).
	AuthKeys   string
	ShardLimit uint
	StateDir   string
	Handoff    time.Duration
	LogLevel   slog.Level
}

// Register adds the flags to fs, with defaults from the environment.
// appName names the default etcd prefix, /gazette/consumers/<appName>.
func (f *Flags) Register(fs *flag.FlagSet, appName string) {
	fs.StringVar(&f.EtcdAddress, "etcd.address", env("ETCD_ADDRESS", "http://localhost:2379"), "etcd endpoints, comma-separated (env ETCD_ADDRESS)")
	fs.StringVar(&f.EtcdCertFile, "etcd.cert-file", env("ETCD_CERT_FILE", ""), "path to the client TLS certificate for etcd (env ETCD_CERT_FILE)")
	fs.StringVar(&f.EtcdCertKeyFile, "etcd.cert-key-file", env("ETCD_CERT_KEY_FILE", ""), "path to the client TLS private key for etcd (env ETCD_CERT_KEY_FILE)")
	fs.StringVar(&f.EtcdTrustedCAFile, "etcd.trusted-ca-file", env("ETCD_TRUSTED_CA_FILE", ""), "path to the CA that etcd's server certificates must be signed by (env ETCD_TRUSTED_CA_FILE)")
	fs.StringVar(&f.EtcdPrefix, "etcd.prefix", env("ETCD_PREFIX", "/gazette/consumers/"+appName), "etcd prefix of the application's shards and members (env ETCD_PREFIX)")
	fs.DurationVar(&f.EtcdLeaseTTL, "etcd.lease", envDuration("ETCD_LEASE_TTL", 20*time.Second), "time-to-live of the member's etcd lease: how long the shards of a member that died stay assigned to it (env ETCD_LEASE_TTL)")

	fs.StringVar(&f.BrokerAddress, "broker.address", env("BROKER_ADDRESS", "http://localhost:8080"), "Gazette broker endpoint (env BROKER_ADDRESS)")
	fs.StringVar(&f.BrokerCertFile, "broker.cert-file", env("BROKER_CERT_FILE", ""), "path to the client TLS certificate for brokers (env BROKER_CERT_FILE)")
	fs.StringVar(&f.BrokerCertKeyFile, "broker.cert-key-file", env("BROKER_CERT_KEY_FILE", ""), "path to the client TLS private key for brokers (env BROKER_CERT_KEY_FILE)")
	fs.StringVar(&f.BrokerTrustedCAFile, "broker.trusted-ca-file", env("BROKER_TRUSTED_CA_FILE", ""), "path to the CA that brokers' server certificates must be signed by (env BROKER_TRUSTED_CA_FILE)")
	fs.StringVar(&f.BrokerAuthKeys, "broker.auth-keys", env("BROKER_AUTH_KEYS", ""), "whitespace- or comma-separated base64 keys; the first signs the authorization tokens of requests to brokers (env BROKER_AUTH_KEYS)")
	fs.StringVar(&f.BrokerAuthToken, "broker.auth-token", env("BROKER_AUTH_TOKEN", ""), "bearer token of requests to brokers, if not signed with --broker.auth-keys (env BROKER_AUTH_TOKEN)")
	fs.StringVar(&f.FileRoot, "broker.file-root", env("BROKER_FILE_ROOT", ""), "filesystem path which roots the brokers' file:// fragment URLs: if set, recovery logs are read from fragments directly, not through brokers (env BROKER_FILE_ROOT)")
	fs.IntVar(&f.BrokerCacheSize, "broker.cache.size", envInt("BROKER_CACHE_SIZE", 256), "size of the route cache of journals; 0 proxies every request (env BROKER_CACHE_SIZE)")

	fs.StringVar(&f.Zone, "consumer.zone", env("CONSUMER_ZONE", "local"), "availability zone of this member (env CONSUMER_ZONE)")
	fs.StringVar(&f.ID, "consumer.id", env("CONSUMER_ID", ""), "unique ID of this member; generated if empty (env CONSUMER_ID)")
	fs.StringVar(&f.Host, "consumer.host", env("CONSUMER_HOST", ""), "host name advertised to clients; the host's name if empty (env CONSUMER_HOST)")
	fs.StringVar(&f.Port, "consumer.port", env("CONSUMER_PORT", ""), "port of the Shard API and metrics; any free port if empty (env CONSUMER_PORT)")
	fs.StringVar(&f.ServerCertFile, "consumer.server-cert-file", env("CONSUMER_SERVER_CERT_FILE", ""), "path to the member's server TLS certificate: if set, its port serves TLS only (env CONSUMER_SERVER_CERT_FILE)")
	fs.StringVar(&f.ServerCertKeyFile, "consumer.server-cert-key-file", env("CONSUMER_SERVER_CERT_KEY_FILE", ""), "path to the member's server TLS private key (env CONSUMER_SERVER_CERT_KEY_FILE)")
	fs.StringVar(&f.ServerCAFile, "consumer.server-ca-file", env("CONSUMER_SERVER_CA_FILE", ""), "path to the CA of client certificates: if set, clients must present a certificate it signed (env CONSUMER_SERVER_CA_FILE)")
	fs.StringVar(&f.PeerCertFile, "consumer.peer-cert-file", env("CONSUMER_PEER_CERT_FILE", ""), "path to the client TLS certificate of the member's calls to members (env CONSUMER_PEER_CERT_FILE)")
	fs.StringVar(&f.PeerCertKeyFile, "consumer.peer-cert-key-file", env("CONSUMER_PEER_CERT_KEY_FILE", ""), "path to the client TLS private key of the member's calls to members (env CONSUMER_PEER_CERT_KEY_FILE)")
	fs.StringVar(&f.PeerCAFile, "consumer.peer-ca-file", env("CONSUMER_PEER_CA_FILE", ""), "path to the CA that members' server certificates must be signed by; the system's CAs if empty (env CONSUMER_PEER_CA_FILE)")
	fs.StringVar(&f.AuthKeys, "consumer.auth-keys", env("CONSUMER_AUTH_KEYS", ""), "whitespace- or comma-separated base64 keys that verify the authorization tokens of calls to the member; if empty, its API is open to anyone who reaches its port (env CONSUMER_AUTH_KEYS)")
	fs.UintVar(&f.ShardLimit, "consumer.limit", uint(envInt("CONSUMER_LIMIT", 1024)), "most shards this member runs (env CONSUMER_LIMIT)")
	fs.StringVar(&f.StateDir, "consumer.state-dir", env("CONSUMER_STATE_DIR", ""), "directory of the shards' local stores (env CONSUMER_STATE_DIR)")
	fs.DurationVar(&f.Handoff, "consumer.handoff", envDuration("CONSUMER_HANDOFF", 30*time.Second), "how long to wait for other members to take over on shutdown (env CONSUMER_HANDOFF)")
	f.LogLevel = slog.LevelInfo
	if v, ok := os.LookupEnv("LOG_LEVEL"); ok {
		if err := f.LogLevel.UnmarshalText([]byte(v)); err != nil {
			slog.Warn("ignoring a malformed log level in the environment", "name", "LOG_LEVEL", "value", v)
		}
	}
	fs.TextVar(&f.LogLevel, "log.level", f.LogLevel, "log level: debug, info, warn or error (env LOG_LEVEL)")
}

// Deps are what an application's constructor needs from the deployment.
type Deps struct {
	// Journals is the broker client.
	Journals pb.RoutedJournalClient
	// Partitions resolves the partitions that generated publishers route to.
	Partitions *partition.Watched
}

// Exit codes of a consumer command, by the error Serve returned.
const (
	ExitFailure         = 1 // Any error but those below.
	ExitLeaseLost       = 3 // service.ErrLeaseLost: restart the member.
	ExitHandoffTimedOut = 4 // service.ErrHandoffTimedOut.
)

// ExitCode returns the process exit code for err, the error of Serve: 0 for
// nil, and distinct codes for a lost etcd lease and a handoff that timed
// out, so that supervisors and operators tell them apart.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, service.ErrLeaseLost):
		return ExitLeaseLost
	case errors.Is(err, service.ErrHandoffTimedOut):
		return ExitHandoffTimedOut
	default:
		return ExitFailure
	}
}

// Main is the whole main function of a consumer command named name: it
// parses the command line into Flags, logs to stderr with slog at
// --log.level, serves the application newApp builds until SIGTERM or
// SIGINT (handing its shards off), and exits with ExitCode, saying why in
// one line if it failed.
func Main(name string, newApp func(Deps) (runtime.Application, error)) {
	var f Flags
	f.Register(flag.CommandLine, name)
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: f.LogLevel})))

	var ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err = Serve(ctx, f, newApp)
	stop()
	if err != nil {
		slog.Error(name+" stopped", "err", err, "exitCode", ExitCode(err))
	}
	os.Exit(ExitCode(err))
}

// Serve connects to etcd and the brokers that f names, builds the
// application with newApp, and runs it as a member until ctx is done (wire
// it to SIGTERM and SIGINT): it then hands its shards to other members and
// returns. Gazette's own logs go to slog.Default(), at its level.
func Serve(ctx context.Context, f Flags, newApp func(Deps) (runtime.Application, error)) error {
	logrusslog.InstallDefault()
	if f.Host == "" {
		var h, err = os.Hostname()
		if err != nil {
			return fmt.Errorf("--consumer.host: %w", err)
		}
		f.Host = h
	}
	var sec, err = f.security()
	if err != nil {
		return err
	}

	var endpoints []string
	for _, e := range strings.Split(f.EtcdAddress, ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
		}
	}
	if len(endpoints) == 0 {
		return errors.New("--etcd.address: no endpoint")
	}
	etcd, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		TLS:         sec.etcdTLS,
		DialTimeout: 10 * time.Second,
		// Follow the cluster's membership, so that a partition leaves other
		// members to try (as Gazette's consumers).
		AutoSyncInterval: time.Minute,
		Logger:           zap.NewNop(),
	})
	if err != nil {
		return fmt.Errorf("connecting to etcd %s: %w", f.EtcdAddress, err)
	}
	defer etcd.Close()

	var ep = pb.Endpoint(f.BrokerAddress)
	if err = ep.Validate(); err != nil {
		return fmt.Errorf("--broker.address: %w", err)
	}
	brokerconn.RegisterDispatcher(f.Zone) // Before dialing: brokers are dialed through it.
	var router pb.DispatchRouter = pb.NoopDispatchRouter{}
	if f.BrokerCacheSize > 0 {
		router = client.NewRouteCache(f.BrokerCacheSize, time.Minute)
	}
	journals, conn, err := brokerconn.DialSecure(ep, router, sec.broker)
	if err != nil {
		return fmt.Errorf("--broker.address: %w", err)
	}
	defer conn.Close()
	if f.FileRoot != "" {
		defer client.InstallFileTransport(f.FileRoot)()
	}

	var appCtx, stopApp = context.WithCancel(context.Background())
	defer stopApp()
	app, err := newApp(Deps{Journals: journals, Partitions: partition.NewWatched(appCtx, journals)})
	if err != nil {
		return fmt.Errorf("building the application: %w", err)
	}
	svc, err := service.New(service.Config{
		App:        app,
		Etcd:       etcd,
		Prefix:     f.EtcdPrefix,
		Journals:   journals,
		Zone:       f.Zone,
		ID:         f.ID,
		Host:       f.Host,
		Port:       f.Port,
		ShardLimit: uint32(f.ShardLimit),
		LeaseTTL:   f.EtcdLeaseTTL,
		StateDir:   f.StateDir,
		ServerTLS:  sec.server,
		PeerTLS:    sec.peer,
		Verifier:   sec.verifier,

		DirectFragmentReads: f.FileRoot != "",
	})
	if err != nil {
		return err
	}
	slog.Info("serving consumer", "member", svc.ID().Suffix, "endpoint", svc.Endpoint(),
		"etcd", f.EtcdAddress, "prefix", f.EtcdPrefix, "brokers", f.BrokerAddress)
	return svc.Run(ctx, f.Handoff)
}

// security is the TLS and authorization that Flags configure.
type security struct {
	etcdTLS      *tls.Config
	broker       brokerconn.Security
	server, peer *tls.Config
	verifier     pb.Verifier
}

// security builds the TLS configurations and authorization of f, naming
// the flag at fault in its errors.
func (f Flags) security() (security, error) {
	var sec security
	var err error
	if f.EtcdCertFile != "" || f.EtcdTrustedCAFile != "" || strings.Contains(f.EtcdAddress, "https://") {
		if sec.etcdTLS, err = buildTLS("etcd.cert-file", "etcd.cert-key-file", f.EtcdCertFile, f.EtcdCertKeyFile, f.EtcdTrustedCAFile); err != nil {
			return sec, err
		}
	}
	if sec.broker.TLS, err = buildTLS("broker.cert-file", "broker.cert-key-file", f.BrokerCertFile, f.BrokerCertKeyFile, f.BrokerTrustedCAFile); err != nil {
		return sec, err
	}
	switch {
	case f.BrokerAuthKeys != "":
		var a, err = auth.NewKeyedAuth(f.BrokerAuthKeys)
		if err != nil {
			return sec, fmt.Errorf("--broker.auth-keys: %w", err)
		}
		sec.broker.Auth = a
	case f.BrokerAuthToken != "":
		sec.broker.Auth = auth.NewBearerAuth(f.BrokerAuthToken)
	}
	if f.ServerCertFile != "" {
		if sec.server, err = buildTLS("consumer.server-cert-file", "consumer.server-cert-key-file", f.ServerCertFile, f.ServerCertKeyFile, f.ServerCAFile); err != nil {
			return sec, err
		}
		if sec.peer, err = buildTLS("consumer.peer-cert-file", "consumer.peer-cert-key-file", f.PeerCertFile, f.PeerCertKeyFile, f.PeerCAFile); err != nil {
			return sec, err
		}
	} else if f.ServerCertKeyFile != "" || f.ServerCAFile != "" {
		return sec, errors.New("--consumer.server-cert-key-file and --consumer.server-ca-file need --consumer.server-cert-file")
	}
	if f.AuthKeys != "" {
		var a, err = auth.NewKeyedAuth(f.AuthKeys)
		if err != nil {
			return sec, fmt.Errorf("--consumer.auth-keys: %w", err)
		}
		sec.verifier = a
	}
	return sec, nil
}

// buildTLS builds the TLS configuration of a certificate, its key and a CA,
// as Gazette's consumers do, naming the flags certFlag and keyFlag.
func buildTLS(certFlag, keyFlag, cert, key, ca string) (*tls.Config, error) {
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("--%s and --%s go together: one is set, the other is not", certFlag, keyFlag)
	}
	var c, err = server.BuildTLSConfig(cert, key, ca)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", certFlag, err)
	}
	return c, nil
}

func env(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}

func envInt(name string, fallback int) int {
	if v, ok := os.LookupEnv(name); ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		slog.Warn("ignoring a malformed integer in the environment", "name", name, "value", v)
	}
	return fallback
}

func envDuration(name string, fallback time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		slog.Warn("ignoring a malformed duration in the environment", "name", name, "value", v)
	}
	return fallback
}
