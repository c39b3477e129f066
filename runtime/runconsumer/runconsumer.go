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
	"maps"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/internal/clientflags"
	"github.com/gazconsumer/gazconsumer/internal/logformat"
	"github.com/gazconsumer/gazconsumer/internal/logrusslog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/heapfloor"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
	"github.com/gazconsumer/gazconsumer/runtime/replica"
	"github.com/gazconsumer/gazconsumer/runtime/service"
	"github.com/gazconsumer/gazconsumer/store/rocks/membudget"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/auth"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
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
	// DirectFragmentReads has recovery logs played from persisted
	// fragments read straight from their stores, through the URLs brokers
	// sign, as Gazette's consumers do (needs a route cache; file:// stores
	// need FileRoot), unless a probe finds the process can't.
	DirectFragmentReads bool
	Zone, ID            string
	Host, Port          string
	// Server TLS of the member's port (a CA makes client certificates
	// required), and the peer certificate of its calls to members.
	ServerCertFile, ServerCertKeyFile, ServerCAFile string
	PeerCertFile, PeerCertKeyFile, PeerCAFile       string
	// AuthKeys verify the authorization of calls of the member's gRPC
	// services (the Shard API, the queries services and the application's).
	AuthKeys   string
	ShardLimit uint
	StateDir   string
	Handoff    time.Duration
	// ReadyIgnoresFailed keeps the member ready while replicas of its
	// shards are FAILED (see service.Config).
	ReadyIgnoresFailed bool
	// ForkFromLog has new shards of a rescale always play their parent's
	// recovery log (see replica.Config).
	ForkFromLog bool
	// ForkCopiesRows has new shards of a rescale copy the rows they own
	// from their parent's store in this member, rather than link its files
	// (see replica.Config).
	ForkCopiesRows bool
	// ForkYield, if not 0, bounds how long a parent's readers hold their
	// reads while a new shard of this member forks from its store; 0: they
	// don't (see replica.Config).
	ForkYield time.Duration
	// HintsInterval is how often a primary stores its recovery log's
	// hints. HintsGrowth, a fraction of its live state, has it store them
	// sooner once a recovery from them would read that much more than one
	// from hints of now; 0: it doesn't (see replica.Config).
	HintsInterval time.Duration
	HintsGrowth   float64
	LogLevel      slog.Level
	// LogFormat is json, text or color (Gazette's names; color logs as
	// text).
	LogFormat string
	// RocksDB is the memory budget of the member's RocksDB stores
	// (--rocksdb.memory-budget, ...), which Serve makes the member's (see
	// membudget.SetMember) for the stores of rocks.Opener to share.
	RocksDB membudget.Config
	// HeapFloor is the heap below which Go's collector doesn't collect
	// (--gc.heap-floor; see package heapfloor); 0 leaves it as Go has it.
	HeapFloor membudget.Size

	// envErrs are the malformed values of environment variables that give
	// flags their defaults, by flag name: configuration errors, unless the
	// flag is set on the command line (see Check).
	envErrs map[string]error
}

// Register adds the flags to fs, with defaults from the environment.
// appName names the default etcd prefix, /gazette/consumers/<appName>.
func (f *Flags) Register(fs *flag.FlagSet, appName string) {
	fs.StringVar(&f.EtcdAddress, "etcd.address", env("ETCD_ADDRESS", "http://localhost:2379"), "etcd endpoints, comma-separated (env ETCD_ADDRESS)")
	fs.StringVar(&f.EtcdCertFile, "etcd.cert-file", env("ETCD_CERT_FILE", ""), "path to the client TLS certificate for etcd (env ETCD_CERT_FILE)")
	fs.StringVar(&f.EtcdCertKeyFile, "etcd.cert-key-file", env("ETCD_CERT_KEY_FILE", ""), "path to the client TLS private key for etcd (env ETCD_CERT_KEY_FILE)")
	fs.StringVar(&f.EtcdTrustedCAFile, "etcd.trusted-ca-file", env("ETCD_TRUSTED_CA_FILE", ""), "path to the CA that etcd's server certificates must be signed by (env ETCD_TRUSTED_CA_FILE)")
	fs.StringVar(&f.EtcdPrefix, "etcd.prefix", env("ETCD_PREFIX", "/gazette/consumers/"+appName), "etcd prefix of the application's shards and members (env ETCD_PREFIX)")
	fs.DurationVar(&f.EtcdLeaseTTL, "etcd.lease", f.envDuration("etcd.lease", "ETCD_LEASE_TTL", 20*time.Second), "time-to-live of the member's etcd lease: how long the shards of a member that died stay assigned to it (env ETCD_LEASE_TTL)")

	fs.StringVar(&f.BrokerAddress, "broker.address", env("BROKER_ADDRESS", "http://localhost:8080"), "Gazette broker endpoint (env BROKER_ADDRESS)")
	fs.StringVar(&f.BrokerCertFile, "broker.cert-file", env("BROKER_CERT_FILE", ""), "path to the client TLS certificate for brokers (env BROKER_CERT_FILE)")
	fs.StringVar(&f.BrokerCertKeyFile, "broker.cert-key-file", env("BROKER_CERT_KEY_FILE", ""), "path to the client TLS private key for brokers (env BROKER_CERT_KEY_FILE)")
	fs.StringVar(&f.BrokerTrustedCAFile, "broker.trusted-ca-file", env("BROKER_TRUSTED_CA_FILE", ""), "path to the CA that brokers' server certificates must be signed by (env BROKER_TRUSTED_CA_FILE)")
	fs.StringVar(&f.BrokerAuthKeys, "broker.auth-keys", env("BROKER_AUTH_KEYS", ""), "whitespace- or comma-separated base64 keys; the first signs the authorization tokens of requests to brokers (env BROKER_AUTH_KEYS)")
	fs.StringVar(&f.BrokerAuthToken, "broker.auth-token", env("BROKER_AUTH_TOKEN", ""), "bearer token of requests to brokers, if not signed with --broker.auth-keys (env BROKER_AUTH_TOKEN)")
	fs.StringVar(&f.FileRoot, "broker.file-root", env("BROKER_FILE_ROOT", ""), "filesystem path which roots the brokers' file:// fragment URLs, for the member to read those fragments directly (see --broker.direct-fragment-reads), mapping the files of recovery logs' persisted fragments into memory (env BROKER_FILE_ROOT)")
	fs.BoolVar(&f.DirectFragmentReads, "broker.direct-fragment-reads", f.envBool("broker.direct-fragment-reads", "BROKER_DIRECT_FRAGMENT_READS", true), "play recovery logs from persisted fragments read straight from their stores, through the URLs brokers sign, rather than through brokers, as Gazette's consumers do (file:// stores need --broker.file-root; a route cache, --broker.cache.size, is needed); a member which finds it can't open a store's URLs reads through brokers (env BROKER_DIRECT_FRAGMENT_READS)")
	fs.IntVar(&f.BrokerCacheSize, "broker.cache.size", f.envInt("broker.cache.size", "BROKER_CACHE_SIZE", 256, 0), "size of the route cache of journals; 0 proxies every request (env BROKER_CACHE_SIZE)")

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
	fs.UintVar(&f.ShardLimit, "consumer.limit", uint(f.envInt("consumer.limit", "CONSUMER_LIMIT", 1024, 1)), "most shards this member runs (env CONSUMER_LIMIT)")
	fs.StringVar(&f.StateDir, "consumer.state-dir", env("CONSUMER_STATE_DIR", ""), "directory of the shards' local stores (env CONSUMER_STATE_DIR)")
	fs.DurationVar(&f.Handoff, "consumer.handoff", f.envDuration("consumer.handoff", "CONSUMER_HANDOFF", 30*time.Second), "how long to wait for other members to take over on shutdown (env CONSUMER_HANDOFF)")
	fs.BoolVar(&f.ForkFromLog, "consumer.fork-from-log", f.envBool("consumer.fork-from-log", "CONSUMER_FORK_FROM_LOG", false), "new shards of a rescale always play their parent's recovery log, even when the parent's primary runs in this member (whose files they link otherwise) (env CONSUMER_FORK_FROM_LOG)")
	fs.BoolVar(&f.ForkCopiesRows, "consumer.fork-copies-rows", f.envBool("consumer.fork-copies-rows", "CONSUMER_FORK_COPIES_ROWS", false), "new shards of a rescale whose parent's primary runs in this member copy the rows they own from its store, rather than link its files (env CONSUMER_FORK_COPIES_ROWS)")
	fs.DurationVar(&f.ForkYield, "consumer.fork-yield", f.envDuration("consumer.fork-yield", "CONSUMER_FORK_YIELD", 0), "if not 0, how long at most a shard's primary holds its reads, leaving the processors to a new shard of a rescale copying rows from its store in this member (--consumer.fork-copies-rows), which then serves sooner; 0: it goes on consuming (env CONSUMER_FORK_YIELD)")
	fs.DurationVar(&f.HintsInterval, "consumer.hints-interval", f.envDuration("consumer.hints-interval", "CONSUMER_HINTS_INTERVAL", 10*time.Second), "how often a shard's primary stores its recovery log's hints in etcd, which a recovery plays from (env CONSUMER_HINTS_INTERVAL)")
	fs.Float64Var(&f.HintsGrowth, "consumer.hints-growth", f.envFloat("consumer.hints-growth", "CONSUMER_HINTS_GROWTH", replica.DefaultHintsGrowth), "a shard's primary stores its hints sooner than --consumer.hints-interval once a recovery from them would read more than one from hints of now by this fraction of its live state (and by 16 MiB), as its recovery log grows past them or the files they name are replaced by smaller ones, at most once a second; 0: only every interval (env CONSUMER_HINTS_GROWTH)")
	fs.BoolVar(&f.ReadyIgnoresFailed, "consumer.ready-ignores-failed", f.envBool("consumer.ready-ignores-failed", "CONSUMER_READY_IGNORES_FAILED", false), "keep the member ready (/debug/ready, gRPC health) while shards of its are FAILED (env CONSUMER_READY_IGNORES_FAILED)")
	f.LogLevel = slog.LevelInfo
	if v, ok := os.LookupEnv("LOG_LEVEL"); ok {
		if err := f.LogLevel.UnmarshalText([]byte(v)); err != nil {
			f.envErr("log.level", "LOG_LEVEL", v, "not a log level (debug, info, warn or error)")
		}
	}
	fs.TextVar(&f.LogLevel, "log.level", f.LogLevel, "log level: debug, info, warn or error (env LOG_LEVEL)")
	f.LogFormat = "text"
	if v, ok := os.LookupEnv("LOG_FORMAT"); ok {
		if logformat.Valid(v) != nil {
			f.envErr("log.format", "LOG_FORMAT", v, "not a log format (json, text or color)")
		} else {
			f.LogFormat = v
		}
	}
	fs.StringVar(&f.LogFormat, "log.format", f.LogFormat, "log format: json (a JSON object a line), text or color (text) (env LOG_FORMAT)")

	f.RocksDB = membudget.Default()
	f.RocksDB.Bytes = f.envSize(membudget.FlagBytes, membudget.EnvBytes, f.RocksDB.Bytes)
	fs.Var(&f.RocksDB.Bytes, membudget.FlagBytes, "memory budget of the member's RocksDB stores, shared by its shards: their block cache (memtables charged to it) and row caches; a `size` in bytes, or with a suffix Ki, Mi, Gi or Ti (env "+membudget.EnvBytes+")")
	fs.Float64Var(&f.RocksDB.WriteBufferShare, membudget.FlagWriteBufferShare, f.envFloat(membudget.FlagWriteBufferShare, membudget.EnvWriteBufferShare, membudget.DefaultWriteBufferShare),
		"fraction of --"+membudget.FlagBytes+" that the stores' memtables may take together (within the block cache), past which RocksDB flushes them (env "+membudget.EnvWriteBufferShare+")")
	fs.Float64Var(&f.RocksDB.RowCacheShare, membudget.FlagRowCacheShare, f.envFloat(membudget.FlagRowCacheShare, membudget.EnvRowCacheShare, membudget.DefaultRowCacheShare),
		"fraction of --"+membudget.FlagBytes+" for the stores' row caches, split evenly among the open stores; the block cache has the rest (env "+membudget.EnvRowCacheShare+")")
	fs.IntVar(&f.RocksDB.Shards, membudget.FlagShards, f.envInt(membudget.FlagShards, membudget.EnvShards, membudget.DefaultShards, 1),
		"shards the member runs at most in normal operation: each store's memtable is the write buffers' budget over the stores open, or over this many when more are open; more may run, within the same budget (env "+membudget.EnvShards+")")

	f.HeapFloor = f.envSize("gc.heap-floor", "GC_HEAP_FLOOR", heapfloor.DefaultBytes)
	fs.Var(&f.HeapFloor, "gc.heap-floor", "the Go heap's least size before the garbage collector runs, however little of it is live (a heap live past half of it is collected as GOGC says, GOMEMLIMIT still bounds it); 0 leaves the collector as Go has it; a `size` in bytes, or with a suffix Ki, Mi, Gi or Ti (env GC_HEAP_FLOOR)")
}

// Check checks f once fs, with which f was registered, has parsed the
// command line: the environment's malformed values of flags not set on the
// command line, and then Validate.
func (f *Flags) Check(fs *flag.FlagSet) error {
	fs.Visit(func(fl *flag.Flag) { delete(f.envErrs, fl.Name) })
	return f.Validate()
}

// Validate reports what in f is misconfigured, naming each flag (and the
// environment variable it may come from) with its value: a malformed value
// of the environment, a value out of range, or a flag that takes effect
// only with another that is not set. Serve validates its Flags first.
func (f Flags) Validate() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(f.envErrs)) {
		errs = append(errs, f.envErrs[name])
	}
	if f.EtcdLeaseTTL < time.Second {
		errs = append(errs, fmt.Errorf("--etcd.lease (env ETCD_LEASE_TTL) is %s: it must be at least 1s", f.EtcdLeaseTTL))
	}
	if f.Handoff < 0 {
		errs = append(errs, fmt.Errorf("--consumer.handoff (env CONSUMER_HANDOFF) is %s: it must not be negative", f.Handoff))
	}
	if f.ForkYield < 0 {
		errs = append(errs, fmt.Errorf("--consumer.fork-yield (env CONSUMER_FORK_YIELD) is %s: it must not be negative", f.ForkYield))
	}
	if f.HintsInterval <= 0 {
		errs = append(errs, fmt.Errorf("--consumer.hints-interval (env CONSUMER_HINTS_INTERVAL) is %s: it must be positive", f.HintsInterval))
	}
	if f.HintsGrowth < 0 || math.IsNaN(f.HintsGrowth) || math.IsInf(f.HintsGrowth, 0) {
		errs = append(errs, fmt.Errorf("--consumer.hints-growth (env CONSUMER_HINTS_GROWTH) is %v: it must be a fraction of 0 or more", f.HintsGrowth))
	}
	if f.ShardLimit == 0 || f.ShardLimit > math.MaxUint32 {
		errs = append(errs, fmt.Errorf("--consumer.limit (env CONSUMER_LIMIT) is %d: it must be from 1 to %d", f.ShardLimit, uint32(math.MaxUint32)))
	}
	if err := logformat.Valid(f.LogFormat); err != nil {
		errs = append(errs, fmt.Errorf("--log.format (env LOG_FORMAT) is %q: it must be json, text or color", f.LogFormat))
	}
	if err := f.RocksDB.Validate(); err != nil {
		errs = append(errs, err)
	}
	if f.BrokerCacheSize < 0 {
		errs = append(errs, fmt.Errorf("--broker.cache.size (env BROKER_CACHE_SIZE) is %d: it must not be negative", f.BrokerCacheSize))
	}
	if f.Port != "" {
		if _, err := strconv.ParseUint(f.Port, 10, 16); err != nil {
			errs = append(errs, fmt.Errorf("--consumer.port (env CONSUMER_PORT) is %q: not a port number", f.Port))
		}
	}
	if f.ServerCertFile == "" {
		for _, p := range []struct{ flag, value string }{
			{"consumer.peer-cert-file", f.PeerCertFile},
			{"consumer.peer-cert-key-file", f.PeerCertKeyFile},
			{"consumer.peer-ca-file", f.PeerCAFile},
		} {
			if p.value != "" {
				errs = append(errs, fmt.Errorf("--%s is %q, but --consumer.server-cert-file is not set: a member calls its peers over TLS only when its own port serves TLS", p.flag, p.value))
			}
		}
	}
	return errors.Join(errs...)
}

// Deps are what an application's constructor needs from the deployment.
type Deps struct {
	// Journals is the broker client.
	Journals pb.RoutedJournalClient
	// Partitions resolves the partitions that generated publishers route to.
	Partitions *partition.Watched
	// Server registers the application's own gRPC services on the
	// member's port, as Gazette's InitApplication hands an application its
	// server: pass it to generated registration functions
	// (pb.RegisterFooServer(d.Server, impl)) in the constructor. They are
	// served over the member's TLS, and each call needs a token of
	// capability READ verified by --consumer.auth-keys (or the capability
	// that Server.WithCapability gives), as the Shard API's calls do; see
	// service.Registrar.
	Server *service.Registrar
}

// Exit codes of a consumer command, by the error Serve returned.
const (
	ExitFailure         = 1 // Any error but those below, misconfiguration included.
	ExitLeaseLost       = 3 // service.ErrLeaseLost: restart the member.
	ExitHandoffTimedOut = 4 // service.ErrHandoffTimedOut.
	ExitEtcdUnreachable = 5 // ErrEtcdUnreachable: etcd was not reached at start.
)

// ErrEtcdUnreachable is returned by Serve when none of etcd's endpoints
// answers within EtcdStartTimeout of the start.
var ErrEtcdUnreachable = errors.New("etcd is unreachable")

// EtcdStartTimeout bounds how long Serve waits for etcd at start.
const EtcdStartTimeout = 10 * time.Second

// StopGrace is how long, past its handoff timeout (--consumer.handoff), a
// member of Main may take to stop after SIGTERM or SIGINT before it exits
// at once with ExitFailure. A second signal ends it at once.
const StopGrace = 30 * time.Second

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
	case errors.Is(err, ErrEtcdUnreachable):
		return ExitEtcdUnreachable
	default:
		return ExitFailure
	}
}

// Main is the whole main function of a consumer command named name: it
// parses the command line into Flags, logs to stderr with slog at
// --log.level in --log.format, serves the application newApp builds until SIGTERM or
// SIGINT (handing its shards off), and exits with ExitCode, saying why in
// one line if it failed. A misconfigured flag or environment variable
// exits with ExitFailure at once, naming it and its value. After the first
// signal, the member stops within its handoff timeout and StopGrace, or
// exits anyway; a second signal ends it at once.
//
// `<command> probe ready|live [flags]` probes the member of this host
// instead (see Probe), taking the same flags and environment as the member
// (Kubernetes' exec probes run with the container's environment): it exits
// with 0 if the probe succeeded, ExitFailure otherwise.
func Main(name string, newApp func(Deps) (runtime.Application, error)) {
	if len(os.Args) > 1 && os.Args[1] == ProbeCommand {
		os.Exit(probeMain(name, os.Args[2:], os.Stdout))
	}
	var f Flags
	var fs = flag.CommandLine
	fs.Init(os.Args[0], flag.ContinueOnError)
	f.Register(fs, name)
	if err := fs.Parse(os.Args[1:]); errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	} else if err != nil {
		os.Exit(ExitFailure) // The flag package said why.
	}
	slog.SetDefault(slog.New(logformat.Handler(os.Stderr, f.LogFormat, f.LogLevel)))
	if err := f.Check(fs); err != nil {
		slog.Error(name+" is misconfigured", "err", err, "exitCode", ExitFailure)
		os.Exit(ExitFailure)
	}

	var ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, func() {
		stop() // A second signal ends the process at once.
		time.AfterFunc(f.Handoff+StopGrace, func() {
			slog.Error(name+" did not stop in time after the signal; exiting", "handoff", f.Handoff, "grace", StopGrace, "exitCode", ExitFailure)
			os.Exit(ExitFailure)
		})
	})
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
	if err := f.Validate(); err != nil {
		return err
	}
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
	var ep = pb.Endpoint(f.BrokerAddress)
	if err = ep.Validate(); err != nil {
		return fmt.Errorf("--broker.address: %w", err)
	}

	var endpoints = clientflags.Endpoints(f.EtcdAddress)
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
	if err = reachEtcd(ctx, etcd, f.EtcdAddress, f.EtcdPrefix); err != nil {
		if ctx.Err() != nil {
			return nil // Stopped while starting.
		}
		return err
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
	if f.DirectFragmentReads && f.BrokerCacheSize == 0 {
		// As Gazette's consumers: a read which may not be proxied must
		// reach a broker of its journal, which only routes tell.
		slog.Info("recovery logs are read through brokers: reading their fragments from their stores needs a route cache (--broker.cache.size)")
	}

	if err = membudget.SetMember(f.RocksDB); err != nil {
		return fmt.Errorf("--%s: %w", membudget.FlagBytes, err)
	}
	floor, err := heapfloor.Start(int64(f.HeapFloor))
	if err != nil {
		return fmt.Errorf("--gc.heap-floor: %w", err)
	}
	defer floor.Stop()

	var appCtx, stopApp = context.WithCancel(context.Background())
	defer stopApp()
	var services = service.NewRegistrar()
	app, err := newApp(Deps{Journals: journals, Partitions: partition.NewWatched(appCtx, journals), Server: services})
	if err != nil {
		return fmt.Errorf("building the application: %w", err)
	}
	svc, err := service.New(service.Config{
		App:        app,
		Services:   services,
		Etcd:       etcd,
		Prefix:     f.EtcdPrefix,
		Journals:   journals,
		Zone:       f.Zone,
		ID:         f.ID,
		Host:       f.Host,
		Port:       f.Port,
		ShardLimit: uint32(f.ShardLimit),
		LeaseTTL:   f.EtcdLeaseTTL,
		Replicas: replica.Config{
			StateDir:            f.StateDir,
			DirectFragmentReads: f.DirectFragmentReads && f.BrokerCacheSize > 0,
			FileRoot:            f.FileRoot,
			ForkFromLog:         f.ForkFromLog,
			ForkCopiesRows:      f.ForkCopiesRows,
			ForkYield:           f.ForkYield,
			HintsInterval:       f.HintsInterval,
			HintsGrowth:         hintsGrowth(f.HintsGrowth),
		},
		ReadyIgnoresFailed: f.ReadyIgnoresFailed,
		ServerTLS:          sec.server,
		PeerTLS:            sec.peer,
		Verifier:           sec.verifier,
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
		if sec.etcdTLS, err = clientflags.BuildTLS("etcd.cert-file", "etcd.cert-key-file", f.EtcdCertFile, f.EtcdCertKeyFile, f.EtcdTrustedCAFile); err != nil {
			return sec, err
		}
	}
	if sec.broker.TLS, err = clientflags.BuildTLS("broker.cert-file", "broker.cert-key-file", f.BrokerCertFile, f.BrokerCertKeyFile, f.BrokerTrustedCAFile); err != nil {
		return sec, err
	}
	if sec.broker.Auth, err = clientflags.BrokerAuth(f.BrokerAuthKeys, f.BrokerAuthToken); err != nil {
		return sec, err
	}
	if f.ServerCertFile != "" {
		if sec.server, err = clientflags.BuildTLS("consumer.server-cert-file", "consumer.server-cert-key-file", f.ServerCertFile, f.ServerCertKeyFile, f.ServerCAFile); err != nil {
			return sec, err
		}
		if sec.peer, err = clientflags.BuildTLS("consumer.peer-cert-file", "consumer.peer-cert-key-file", f.PeerCertFile, f.PeerCertKeyFile, f.PeerCAFile); err != nil {
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

// reachEtcd returns an error wrapping ErrEtcdUnreachable, naming address,
// unless etcd answers a read of prefix within EtcdStartTimeout.
func reachEtcd(ctx context.Context, etcd *clientv3.Client, address, prefix string) error {
	var readCtx, cancel = context.WithTimeout(ctx, EtcdStartTimeout)
	defer cancel()
	if _, err := etcd.Get(readCtx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("%w: --etcd.address %s did not answer within %s: %w", ErrEtcdUnreachable, address, EtcdStartTimeout, err)
	}
	return nil
}

// envErr records that environment variable name's value v, the default of
// flag, is malformed: why says how.
func (f *Flags) envErr(flag, name, v, why string) {
	if f.envErrs == nil {
		f.envErrs = make(map[string]error)
	}
	f.envErrs[flag] = fmt.Errorf("environment variable %s=%q (the default of --%s): %s", name, v, flag, why)
}

func env(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}

// envInt returns the integer of environment variable name, the default of
// flag, or fallback if it is not set. It must be at least least.
func (f *Flags) envInt(flag, name string, fallback, least int) int {
	if v, ok := os.LookupEnv(name); ok {
		if n, err := strconv.Atoi(v); err != nil {
			f.envErr(flag, name, v, "not an integer")
		} else if n < least {
			f.envErr(flag, name, v, fmt.Sprintf("it must be at least %d", least))
		} else {
			return n
		}
	}
	return fallback
}

// envParsed returns environment variable name parsed by parse, the default
// of flag, or fallback if it is not set; a value parse refuses is recorded
// as not want.
func envParsed[T any](f *Flags, flag, name string, fallback T, parse func(string) (T, error), want string) T {
	if v, ok := os.LookupEnv(name); ok {
		if x, err := parse(v); err == nil {
			return x
		}
		f.envErr(flag, name, v, "not "+want)
	}
	return fallback
}

// hintsGrowth is replica.Config.HintsGrowth of flag --consumer.hints-growth,
// whose 0 turns it off.
func hintsGrowth(flag float64) float64 {
	if flag == 0 {
		return -1
	}
	return flag
}

// envSize returns the size of environment variable name (membudget.Size),
// the default of flag, or fallback if it is not set.
func (f *Flags) envSize(flag, name string, fallback membudget.Size) membudget.Size {
	return envParsed(f, flag, name, fallback, membudget.ParseSize,
		"a size (a number of bytes, or with a suffix Ki, Mi, Gi or Ti, such as 512Mi or 1.5Gi)")
}

// envFloat returns the number of environment variable name, the default
// of flag, or fallback if it is not set.
func (f *Flags) envFloat(flag, name string, fallback float64) float64 {
	return envParsed(f, flag, name, fallback, func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }, "a number")
}

// envBool returns the boolean of environment variable name, the default of
// flag, or fallback if it is not set.
func (f *Flags) envBool(flag, name string, fallback bool) bool {
	return envParsed(f, flag, name, fallback, strconv.ParseBool, "a boolean (true or false)")
}

// envDuration returns the duration of environment variable name, the
// default of flag, or fallback if it is not set.
func (f *Flags) envDuration(flag, name string, fallback time.Duration) time.Duration {
	return envParsed(f, flag, name, fallback, time.ParseDuration, "a duration (such as 30s or 1m)")
}
