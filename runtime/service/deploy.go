package service

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/internal/logrusslog"
	"github.com/gazconsumer/gazconsumer/runtime"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.uber.org/zap"
)

// Flags are the settings of a consumer binary. Their flag and environment
// names are those of Gazette's own consumers (`--etcd.address` or
// ETCD_ADDRESS, `--broker.address` or BROKER_ADDRESS, `--consumer.port` or
// CONSUMER_PORT, ...), so deployments configure either the same way.
type Flags struct {
	EtcdAddress     string
	EtcdPrefix      string
	EtcdLeaseTTL    time.Duration
	BrokerAddress   string
	BrokerCacheSize int
	FileRoot        string
	Zone, ID        string
	Host, Port      string
	ShardLimit      uint
	StateDir        string
	Handoff         time.Duration
}

// Register adds the flags to fs, with defaults from the environment.
// appName names the default etcd prefix, /gazette/consumers/<appName>.
func (f *Flags) Register(fs *flag.FlagSet, appName string) {
	fs.StringVar(&f.EtcdAddress, "etcd.address", env("ETCD_ADDRESS", "http://localhost:2379"), "etcd endpoint (env ETCD_ADDRESS)")
	fs.StringVar(&f.EtcdPrefix, "etcd.prefix", env("ETCD_PREFIX", "/gazette/consumers/"+appName), "etcd prefix of the application's shards and members (env ETCD_PREFIX)")
	fs.DurationVar(&f.EtcdLeaseTTL, "etcd.lease", envDuration("ETCD_LEASE_TTL", 20*time.Second), "time-to-live of the member's etcd lease: how long the shards of a member that died stay assigned to it (env ETCD_LEASE_TTL)")
	fs.StringVar(&f.BrokerAddress, "broker.address", env("BROKER_ADDRESS", "http://localhost:8080"), "Gazette broker endpoint (env BROKER_ADDRESS)")
	fs.StringVar(&f.FileRoot, "broker.file-root", env("BROKER_FILE_ROOT", ""), "filesystem path which roots the brokers' file:// fragment URLs: if set, recovery logs are read from fragments directly, not through brokers (env BROKER_FILE_ROOT)")
	fs.IntVar(&f.BrokerCacheSize, "broker.cache.size", envInt("BROKER_CACHE_SIZE", 256), "size of the route cache of journals; 0 proxies every request (env BROKER_CACHE_SIZE)")
	fs.StringVar(&f.Zone, "consumer.zone", env("CONSUMER_ZONE", "local"), "availability zone of this member (env CONSUMER_ZONE)")
	fs.StringVar(&f.ID, "consumer.id", env("CONSUMER_ID", ""), "unique ID of this member; generated if empty (env CONSUMER_ID)")
	fs.StringVar(&f.Host, "consumer.host", env("CONSUMER_HOST", ""), "host name advertised to clients; the host's name if empty (env CONSUMER_HOST)")
	fs.StringVar(&f.Port, "consumer.port", env("CONSUMER_PORT", ""), "port of the Shard API and metrics; any free port if empty (env CONSUMER_PORT)")
	fs.UintVar(&f.ShardLimit, "consumer.limit", uint(envInt("CONSUMER_LIMIT", 1024)), "most shards this member runs (env CONSUMER_LIMIT)")
	fs.StringVar(&f.StateDir, "consumer.state-dir", env("CONSUMER_STATE_DIR", ""), "directory of the shards' local stores (env CONSUMER_STATE_DIR)")
	fs.DurationVar(&f.Handoff, "consumer.handoff", 30*time.Second, "how long to wait for other members to take over on shutdown")
}

// Deps are what an application's constructor needs from the deployment.
type Deps struct {
	// Journals is the broker client.
	Journals pb.RoutedJournalClient
	// Partitions resolves the partitions that generated publishers route to.
	Partitions *WatchedPartitions
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
	var etcd, err = clientv3.New(clientv3.Config{
		Endpoints:   []string{f.EtcdAddress},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
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
	journals, conn, err := brokerconn.Dial(ep, router)
	if err != nil {
		return fmt.Errorf("--broker.address: %w", err)
	}
	defer conn.Close()
	if f.FileRoot != "" {
		defer client.InstallFileTransport(f.FileRoot)()
	}

	var appCtx, stopApp = context.WithCancel(context.Background())
	defer stopApp()
	app, err := newApp(Deps{Journals: journals, Partitions: NewWatchedPartitions(appCtx, journals)})
	if err != nil {
		return fmt.Errorf("building the application: %w", err)
	}
	svc, err := New(Config{
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

		DirectFragmentReads: f.FileRoot != "",
	})
	if err != nil {
		return err
	}
	slog.Info("serving consumer", "member", svc.ID().Suffix, "endpoint", svc.Endpoint(),
		"etcd", f.EtcdAddress, "prefix", f.EtcdPrefix, "brokers", f.BrokerAddress)
	return svc.Run(ctx, f.Handoff)
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
