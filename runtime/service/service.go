// Package service runs a gazconsumer application as a member of a consumer
// group: it announces the process in etcd, takes part in the assignment of
// shards across members through Gazette's allocator, starts, updates and
// stops the replicas of the shards assigned to it (runtime/replica: as
// primary, or as hot standby following the recovery log), and hosts on its
// port the services of the member: Gazette's Shard API (runtime/shardapi),
// the consumer's queries (runtime/query), the application's own,
// diagnostics and health.
//
// Shard specs, members and assignments are kept in etcd under the
// application's prefix exactly as Gazette consumers keep them (see
// runtime/groupkeys); a replica reads its sources through runtime/source
// and records its metrics through runtime/shardmetrics.
//
// # Undecodable messages
//
// A source message that fails to decode fails its shard, with a status
// naming the journal and offset, unless the shard's labels say otherwise:
// with gazconsumer.dev/on-decode-error=skip and
// gazconsumer.dev/dead-letter-journal=JOURNAL (see source.LabelOnDecodeError),
// the shard skips the message, logs it, counts it in the metric
// gazconsumer_shard_skipped_messages_total and records it, exactly once,
// into JOURNAL as a source.Skipped message in JSON. source.ListSkipped reads
// the records back, read-committed; `gazctl journals read` shows them raw.
//
// # Queries
//
// A member of a consumer with queries services (runtime/query: generated
// from services annotated (gazconsumer.v1.queries), registered under the
// consumer's name) serves them on its gRPC port beside the Shard API,
// answering from the committed state of the shards it is the primary of
// and proxying the rest to their primaries, and serves gRPC server
// reflection, so that grpcurl lists and calls them. Queries are verified by
// the Verifier as the Shard API's Stat is: capability READ, of the
// shards answering (see runtime/query). Reflection, which reveals only the
// schema, is served to anyone who reaches the port.
//
// # Diagnostics
//
// A member serves, over HTTP on its port, /debug/ready (200 once it has
// joined its group, while it is not exiting and no replica of its shards
// is FAILED, unless Config.ReadyIgnoresFailed; 503 and the reason
// otherwise: see Service.Ready), Go's profiles at /debug/pprof/ and expvar
// at /debug/vars; and the gRPC health service (grpc.health.v1), SERVING
// for "" and each of its services exactly when it is ready.
//
// # Metrics
//
// A member serves Prometheus metrics at /metrics and /debug/metrics on its port: per shard,
// transactions, their durations and the time spent in each of their phases,
// the messages, bytes and skipped messages they consumed, the offsets a
// primary has read through and how far it lags each source's write head,
// and how much of its recovery log a recovering or standby replica has
// played and has yet to play, the failures of its replicas and of their
// commits, and whether the member is ready. It also exports the metrics of
// Gazette's consumers that it fills with their meaning (gazette_shard_up,
// gazette_shard_transactions_total, gazette_shard_read_*,
// gazette_shard_phase_seconds_total), under their names and labels.
package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"github.com/gazconsumer/gazconsumer/runtime/replica"
	"github.com/gazconsumer/gazconsumer/runtime/shardapi"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
	"go.gazette.dev/core/server"
	"go.gazette.dev/core/task"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/reflection"
)

// Config configures a Service: the consumer group it joins, the member it
// is, the replicas it runs and what it serves on its port.
type Config struct {
	// App is the application whose shards the service runs.
	App runtime.Application
	// Etcd client, and the prefix under which the application's shard
	// specs, members and assignments live (e.g. /gazette/consumers/orders).
	Etcd   *clientv3.Client
	Prefix string
	// Journals is a client of the Gazette brokers.
	Journals pb.RoutedJournalClient

	// Zone and ID of this member; an empty ID is generated.
	Zone, ID string
	// Host advertised to other members and clients, and the Port to serve
	// the Shard API and metrics on ("" picks a free port).
	Host, Port string
	// ShardLimit is the most shards this member runs, as primary or
	// standby; zero means 1024.
	ShardLimit uint32
	// LeaseTTL of the member's etcd lease; zero means 20s.
	LeaseTTL time.Duration

	// Replicas configures the replicas of the shards the member runs: an
	// empty StateDir means a directory under os.TempDir(), a zero
	// HintsInterval 10s.
	Replicas replica.Config

	// ServerTLS, if set, serves the member's gRPC and HTTP port over TLS
	// (server.BuildTLSConfig: with a CA, client certificates are required
	// and verified). PeerTLS is the TLS of the member's own calls to its
	// port (its loopback), which presents the peer certificate.
	ServerTLS, PeerTLS *tls.Config
	// Verifier verifies the authorization of every call of the Shard API
	// (Gazette's auth.NewKeyedAuth): a call without a token, or with one
	// not signed by its keys or whose claims don't cover the call, is
	// refused. Nil serves the API to anyone who reaches the port, which
	// the member logs as it starts.
	Verifier pb.Verifier
	// Authorizer authorizes the queries the member proxies to other
	// members. Nil uses the Verifier, if it is also an Authorizer (as
	// Gazette's auth.NewKeyedAuth is).
	Authorizer pb.Authorizer
	// Queries are the queries services the member serves. Nil serves
	// those registered for the application's consumer
	// (query.ServicesOf), if the application names it (generated
	// applications do, with a ConsumerName method).
	Queries []*query.Service
	// Partitions lists the partitions that queries' partition keys map
	// among. Nil watches them through Journals.
	Partitions runtime.PartitionLister
	// Services are the application's own gRPC services, served on the
	// member's port and verified by the Verifier (see Registrar). Nil
	// serves none.
	Services *Registrar
	// ReadyIgnoresFailed keeps the member ready (at /debug/ready, and in
	// the gRPC health service) while replicas of its shards are FAILED: by
	// default, a FAILED shard makes it not ready, naming the shard.
	ReadyIgnoresFailed bool
}

// Service is a running member of a consumer application.
type Service struct {
	cfg   Config
	ks    *keyspace.KeySpace
	state *allocator.State
	srv   *server.Server
	tasks *task.Group
	sigCh chan os.Signal

	// host is what the replicas need of the member.
	host replica.Host
	// shards are the local replicas, guarded by ks.Mu: the KeySpace
	// observer that maintains them runs under its write lock.
	shards map[pc.ShardID]*replica.Replica
	wg     sync.WaitGroup // Of every shard goroutine.
	closed bool           // Set once shards may no longer be started.

	queries   *query.Server // Nil without queries services.
	stopWatch func()        // Stops the watches of partitions the service started.

	aborted atomic.Bool // Set by Abort.

	joined      atomic.Bool    // Set once the member's session started and its KeySpace loaded.
	joinedCh    chan struct{}  // Closed as joined is set.
	exiting     atomic.Bool    // Set once Run's context is done.
	health      *health.Server // The gRPC health service, reflecting Ready.
	healthNames []string       // The services it reports on.
	healthMu    sync.Mutex     // Orders the updates of health.
}

// New builds a Service and binds its port. Run starts it.
func New(cfg Config) (*Service, error) {
	if cfg.App == nil || cfg.Etcd == nil || cfg.Journals == nil {
		return nil, errors.New("service: Config needs App, Etcd and Journals")
	}
	if cfg.Prefix == "" {
		return nil, errors.New("service: Config.Prefix is required")
	}
	if cfg.Zone == "" {
		cfg.Zone = "local"
	}
	if cfg.ID == "" {
		cfg.ID = fmt.Sprintf("member-%d-%d", os.Getpid(), time.Now().UnixNano()%1e6)
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.ShardLimit == 0 {
		cfg.ShardLimit = 1024
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = 20 * time.Second
	}
	if cfg.Replicas.StateDir == "" {
		cfg.Replicas.StateDir = filepath.Join(os.TempDir(), "gazconsumer", cfg.ID)
	}
	if cfg.Replicas.HintsInterval == 0 {
		cfg.Replicas.HintsInterval = 10 * time.Second
	}
	var spec = &pc.ConsumerSpec{ProcessSpec: pb.ProcessSpec{Id: pb.ProcessSpec_ID{Zone: cfg.Zone, Suffix: cfg.ID}, Endpoint: "http://placeholder:1"}, ShardLimit: cfg.ShardLimit}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("service: member %s: %w", cfg.ID, err)
	}
	if err := os.MkdirAll(cfg.Replicas.StateDir, 0o750); err != nil {
		return nil, fmt.Errorf("service: creating state directory: %w", err)
	}
	var iface = ""
	if cfg.Host == "127.0.0.1" || cfg.Host == "localhost" {
		iface = "127.0.0.1" // Don't listen beyond loopback when advertising it.
	}
	if cfg.ServerTLS != nil && cfg.PeerTLS == nil {
		return nil, errors.New("service: Config.ServerTLS needs PeerTLS, for the member's calls to itself")
	}
	var srv, err = server.New(iface, cfg.Host, cfg.Port, cfg.ServerTLS, cfg.PeerTLS, 4<<20, nil)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}

	var s = &Service{
		cfg:    cfg,
		ks:     groupkeys.NewKeySpace(cfg.Prefix),
		srv:    srv,
		tasks:  task.NewGroup(context.Background()),
		sigCh:  make(chan os.Signal, 1),
		shards: make(map[pc.ShardID]*replica.Replica),

		joinedCh: make(chan struct{}),
	}
	s.host = replica.Host{App: cfg.App, Etcd: cfg.Etcd, Journals: cfg.Journals, KeySpace: s.ks, Member: cfg.ID, Config: cfg.Replicas,
		Local: s.localReplica}
	s.state = allocator.NewObservedState(s.ks, allocator.MemberKey(s.ks, cfg.Zone, cfg.ID), shardIsConsistent)
	s.ks.Observers = append(s.ks.Observers, s.updateLocalShards, s.updateHealth)
	s.ks.WatchApplyDelay = 10 * time.Millisecond

	var verifier = cfg.Verifier
	if verifier == nil {
		verifier = auth.NewNoopAuth()
	}
	pc.RegisterShardServer(srv.GRPCServer, pc.NewVerifiedShardServer(shardapi.New(apiMember{s}), verifier))
	s.serveQueries()
	reflection.Register(srv.GRPCServer)
	s.serveDiagnostics()
	if cfg.Services != nil {
		if err := cfg.Services.serve(srv.GRPCServer, verifier); err != nil {
			s.health.Shutdown()
			s.stopWatch()
			if s.queries != nil {
				s.queries.Close()
			}
			_ = srv.GRPCLoopback.Close()
			srv.GRPCServer.Stop()
			srv.CMux.Close() // Its listener: nothing serves it yet.
			return nil, fmt.Errorf("service: %w", err)
		}
	}
	s.healthNames = s.healthServices()
	s.refreshHealth()
	return s, nil
}

// serveQueries registers the queries services of the service's consumer.
func (s *Service) serveQueries() {
	s.stopWatch = func() {}
	var services = s.cfg.Queries
	if services == nil {
		if named, ok := s.cfg.App.(interface{ ConsumerName() string }); ok {
			services = query.ServicesOf(named.ConsumerName())
		}
	}
	if len(services) == 0 {
		return
	}
	var partitions = s.cfg.Partitions
	if partitions == nil {
		var ctx, cancel = context.WithCancel(context.Background())
		partitions, s.stopWatch = partition.NewWatched(ctx, s.cfg.Journals), cancel
	}
	var authorizer = s.authorizer()
	s.queries = query.NewServer(query.ServerConfig{
		Member:     s,
		Router:     query.NewRouter(s.ks, partitions),
		Verifier:   s.cfg.Verifier,
		Authorizer: authorizer,
		Dial:       query.Dialer(s.cfg.PeerTLS),
	})
	for _, svc := range services {
		s.queries.Register(s.srv.GRPCServer, svc)
	}
}

// authorizer returns what signs the calls the member proxies to other
// members: Config.Authorizer, or else the Verifier if it is also an
// Authorizer, or nil.
func (s *Service) authorizer() pb.Authorizer {
	if s.cfg.Authorizer != nil {
		return s.cfg.Authorizer
	} else if a, ok := s.cfg.Verifier.(pb.Authorizer); ok {
		return a
	}
	return nil
}

// Replica waits until the member's replica of shard id serves as the
// shard's primary (it may still be recovering, or starting), and returns
// its store and the replica's context: a query.Member. It returns false at
// once if the member has no replica of the shard, and once the replica
// stops, or ctx ends, before it serves.
func (s *Service) Replica(ctx context.Context, id pc.ShardID) (runtime.CommittedReader, context.Context, bool) {
	s.ks.Mu.RLock()
	var sh, ok = s.shards[id]
	s.ks.Mu.RUnlock()
	if !ok {
		return nil, nil, false
	}
	var store = sh.AwaitServing(ctx)
	if store == nil {
		return nil, nil, false
	} else if v, ok := s.cfg.App.(runtime.OwnedViewer); ok {
		return ownedStore{CommittedReader: store, id: id, viewer: v}, sh.Context(), true
	}
	return store, sh.Context(), true
}

// ownedStore is the committed state of shard id as queries read it: without
// what the shard, split by a rescale, keeps hidden (runtime.OwnedViewer).
type ownedStore struct {
	runtime.CommittedReader
	id     pc.ShardID
	viewer runtime.OwnedViewer
}

// ReadCommitted calls fn with the owned view of what the store's commits
// made durable.
func (o ownedStore) ReadCommitted(ctx context.Context, fn func(runtime.Reader) error) error {
	return o.CommittedReader.ReadCommitted(ctx, func(r runtime.Reader) error {
		var v, err = o.viewer.OwnedView(o.id, r)
		if err != nil {
			return err
		}
		return fn(v)
	})
}

// localReplica returns the member's replica of shard id, or nil.
func (s *Service) localReplica(id pc.ShardID) *replica.Replica {
	s.ks.Mu.RLock()
	defer s.ks.Mu.RUnlock()
	return s.shards[id]
}

// Endpoint at which the service serves the Shard API.
func (s *Service) Endpoint() pb.Endpoint { return s.srv.Endpoint() }

// KeySpace of the application, as this member observes it.
func (s *Service) KeySpace() *keyspace.KeySpace { return s.ks }

// ID of this member.
func (s *Service) ID() pb.ProcessSpec_ID {
	return pb.ProcessSpec_ID{Zone: s.cfg.Zone, Suffix: s.cfg.ID}
}

// ErrHandoffTimedOut is returned by Run when other members did not take
// over the member's shards within the handoff timeout: the member stopped
// with shards still assigned to it, which wait for its lease to go.
var ErrHandoffTimedOut = errors.New("shards were not handed off in time")

// ErrLeaseLost is returned by Run when the member could not keep its etcd
// lease alive (etcd unreachable for longer than the lease's TTL): other
// members may already run its shards, so it stops them and exits rather
// than go on, as Gazette's consumers do. A supervisor should restart it.
var ErrLeaseLost = errors.New("lost the member's etcd lease (etcd was unreachable for longer than --etcd.lease); its shards may run elsewhere, so it stopped")

// Run announces the member and serves until ctx is done, then exits as
// Gazette members do on SIGTERM: it marks itself as exiting, so that the
// allocator moves its shards to other members (keeping each shard's hot
// standbys ready before releasing its primary), waits up to handoff for
// that, and stops. The last member stops at once. Run returns
// ErrHandoffTimedOut if the handoff did not complete in time.
//
// As in Gazette, the allocator releases a member's shards only to members
// that remain, and keeps at least as many members as the largest replication
// (primary and hot standbys) of a shard: in a rolling restart, start each
// replacement before stopping the member it replaces.
//
// Run returns nil if ctx is done before the member has started (it may be
// waiting for etcd, or for a former lease of its key to expire).
func (s *Service) Run(ctx context.Context, handoff time.Duration) error {
	// The port is served from the start, so that /debug/ready and the
	// health service answer (not ready) while the member joins, which may
	// take as long as a former lease of its key lives; calls of the Shard
	// API wait for it to join, within their deadlines.
	members.Store(s, struct{}{}) // For gazette_shard_up.
	defer members.Delete(s)
	var serving = task.NewGroup(context.Background())
	s.srv.QueueTasks(serving)
	serving.GoRun()
	if err := s.startSession(ctx); err != nil {
		s.health.Shutdown()
		serving.Cancel()
		s.srv.BoundedGracefulStop()
		_ = serving.Wait()
		_ = s.srv.GRPCLoopback.Close()
		s.stopWatch()
		if ctx.Err() != nil {
			slog.Info("stopped while starting", "member", s.cfg.ID, "err", err)
			return nil
		}
		return fmt.Errorf("service: member %s: %w", s.cfg.ID, err)
	}
	s.joined.Store(true)
	close(s.joinedCh)
	s.refreshHealth()
	s.tasks.Queue("server", func() error {
		<-serving.Context().Done() // Cancelled by service.Stop, or by an error of the server.
		return serving.Wait()
	})
	s.tasks.Queue("keyspace.Watch", func() error {
		if err := s.ks.Watch(s.tasks.Context(), s.cfg.Etcd); err != nil && s.tasks.Context().Err() == nil {
			return fmt.Errorf("watching %s: %w", s.cfg.Prefix, err)
		}
		return nil
	})
	s.tasks.Queue("service.Stop", func() error {
		<-s.tasks.Context().Done()
		s.stopShards()
		serving.Cancel()
		s.srv.BoundedGracefulStop()
		return nil
	})
	slog.Info("consumer member started", "member", s.cfg.ID, "endpoint", s.srv.Endpoint(), "prefix", s.cfg.Prefix,
		"tls", s.cfg.ServerTLS != nil, "authorization", s.cfg.Verifier != nil)
	if s.cfg.Verifier == nil {
		slog.Warn("the member's Shard API is open: anyone who reaches its port may apply, delete or unassign shards (set --consumer.auth-keys)",
			"member", s.cfg.ID, "endpoint", s.srv.Endpoint())
	}
	s.tasks.GoRun()

	var handoffErr error
	select {
	case <-ctx.Done():
		s.exiting.Store(true)
		s.refreshHealth()
		s.ks.Mu.RLock()
		var alone = len(s.state.Members) <= 1
		s.ks.Mu.RUnlock()
		if alone {
			break // No member to hand shards to.
		}
		s.sigCh <- syscall.SIGTERM
		var timer = time.NewTimer(handoff)
		select {
		case <-s.tasks.Context().Done():
			// The allocator has moved every shard away, and stopped.
		case <-timer.C:
			slog.Warn("shards were not handed off in time; stopping", "member", s.cfg.ID, "timeout", handoff)
			handoffErr = fmt.Errorf("service: member %s: %w (timeout %s)", s.cfg.ID, ErrHandoffTimedOut, handoff)
		}
		timer.Stop()
	case <-s.tasks.Context().Done():
	}
	s.exiting.Store(true)
	s.health.Shutdown() // NOT_SERVING, for good.
	s.tasks.Cancel()
	var err = s.tasks.Wait()
	_ = s.srv.GRPCLoopback.Close()
	if s.queries != nil {
		s.queries.Close()
	}
	s.stopWatch()
	if s.aborted.Load() {
		return nil
	}
	return errors.Join(handoffErr, err)
}

// startSession is allocator.StartSession, but keeps the member's lease so
// that Abort can leave it to expire rather than revoke it, and gives up
// once ctx is done. It takes the lease, announces the member, loads the
// KeySpace, and queues the tasks which mark the member as exiting on
// s.sigCh and run the allocator.
func (s *Service) startSession(ctx context.Context) error {
	var spec = &pc.ConsumerSpec{ProcessSpec: pb.ProcessSpec{Id: s.ID(), Endpoint: s.srv.Endpoint()}, ShardLimit: s.cfg.ShardLimit}
	// The lease lives until the member stops; while the member starts, ctx
	// ends it too.
	var leaseCtx, endLease = context.WithCancel(context.Background())
	var starting = context.AfterFunc(ctx, endLease)
	var lease, err = concurrency.NewSession(s.cfg.Etcd, concurrency.WithTTL(max(1, int(s.cfg.LeaseTTL.Seconds()))), concurrency.WithContext(leaseCtx))
	if err != nil {
		endLease()
		return fmt.Errorf("establishing the etcd lease: %w", err)
	}
	ann, err := announce(leaseCtx, s.cfg.Etcd, s.state.LocalKey, spec.MarshalString(), lease.Lease())
	if err == nil {
		if err = s.state.KS.Load(leaseCtx, s.cfg.Etcd, ann.revision); err != nil {
			err = fmt.Errorf("loading the KeySpace: %w", err)
		}
	}
	if err == nil && !starting() {
		err = fmt.Errorf("starting: %w", ctx.Err()) // ctx ended the lease.
	}
	if err != nil {
		lease.Orphan()
		endLease()
		// Revoked within a bound of its own: etcd may be unreachable.
		var revokeCtx, cancel = context.WithTimeout(context.Background(), time.Second)
		_, _ = s.cfg.Etcd.Revoke(revokeCtx, lease.Lease())
		cancel()
		return err
	}
	s.tasks.Queue("lease.Close", func() error {
		defer endLease()
		select {
		case <-s.tasks.Context().Done():
			if s.aborted.Load() {
				lease.Orphan() // As after a crash: the lease expires in its time.
				return nil
			}
			return lease.Close()
		case <-lease.Done():
			return ErrLeaseLost
		}
	})
	s.tasks.Queue("mark member exiting on signal", func() error {
		select {
		case sig := <-s.sigCh:
			slog.Info("member is exiting", "member", s.cfg.ID, "signal", sig)
		case <-s.tasks.Context().Done():
			return nil
		}
		// The allocator discharges the shards of an exiting member as other
		// members have capacity, and Allocate returns once none remain.
		spec.SetExiting()
		return ann.update(s.tasks.Context(), spec.MarshalString())
	})
	s.tasks.Queue("Allocate", func() error {
		defer s.tasks.Cancel()
		var err = allocator.Allocate(allocator.AllocateArgs{Context: s.tasks.Context(), Etcd: s.cfg.Etcd, State: s.state})
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		return err
	})
	return nil
}

// Abort stops the member at once, as a crash would: it neither hands off
// its shards nor revokes its etcd lease, so other members take its shards
// over only once the lease expires (Config.LeaseTTL). Run then returns nil.
func (s *Service) Abort() {
	s.aborted.Store(true)
	s.tasks.Cancel()
}

// stopShards cancels every local shard and waits for them to tear down.
func (s *Service) stopShards() {
	s.ks.Mu.Lock()
	s.closed = true
	for id, sh := range s.shards {
		sh.Cancel()
		delete(s.shards, id)
	}
	s.ks.Mu.Unlock()
	s.wg.Wait()
}

// updateLocalShards reconciles the local shards with the assignments of
// this member. It's a KeySpace observer, called under ks.Mu's write lock.
func (s *Service) updateLocalShards() {
	if s.closed {
		return
	}
	var next = make(map[pc.ShardID]*replica.Replica, len(s.state.LocalItems))
	for _, li := range s.state.LocalItems {
		var asn = li.Assignments[li.Index]
		var item = li.Item.Decoded.(allocator.Item)
		var id = pc.ShardID(item.ID)
		var spec = item.ItemValue.(*pc.ShardSpec)

		var sh, ok = s.shards[id]
		var prior *replica.Replica
		if ok && sh.CreateRevision() != asn.Raw.CreateRevision && !isPromotion(sh, asn) {
			// The assignment was removed and created anew: start over.
			ok, prior = false, sh
		} else if ok {
			if why := replica.RestartReason(sh.Spec(), spec); why != "" {
				// The change applies only to a replica starting anew: this
				// one stops (its writes to the recovery log fenced by the
				// next), and another starts from the recovery log.
				slog.Info("shard spec changed: restarting the replica", "shard", id, "member", s.cfg.ID, "changed", why)
				ok, prior = false, sh
			}
		}
		if !ok {
			sh = replica.New(&s.host, spec, asn, prior)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				sh.Serve()
			}()
		} else {
			delete(s.shards, id)
		}
		sh.Update(spec, asn)
		next[id] = sh
	}
	for _, sh := range s.shards {
		sh.Cancel() // No longer assigned here.
	}
	s.shards = next
}

// isPromotion reports whether asn promotes sh's assignment to primary:
// Gazette's allocator promotes a standby by moving its assignment to slot 0.
func isPromotion(sh *replica.Replica, asn keyspace.KeyValue) bool {
	return asn.Decoded.(allocator.Assignment).Slot < sh.Slot()
}
