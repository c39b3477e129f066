// Package service runs a gazconsumer application as a member of a consumer
// group: it announces the process in etcd, takes part in the assignment of
// shards across members through Gazette's allocator, runs the shards
// assigned to it (as primary, or as hot standby following the recovery log)
// and serves Gazette's Shard API, so that `gazctl shards` works against it.
//
// Shard specs, members and assignments are kept in etcd under the
// application's prefix exactly as Gazette consumers keep them.
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
	"go.gazette.dev/core/server"
	"go.gazette.dev/core/task"
)

// Config configures a Service.
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
	// StateDir holds the local directories of the shards' stores; empty
	// means a directory under os.TempDir().
	StateDir string
	// HintsInterval is how often a primary stores recovery-log hints;
	// zero means 10s.
	HintsInterval time.Duration
}

// Service is a running member of a consumer application.
type Service struct {
	cfg   Config
	ks    *keyspace.KeySpace
	state *allocator.State
	srv   *server.Server
	tasks *task.Group
	sigCh chan os.Signal

	// shards are the local replicas, guarded by ks.Mu: the KeySpace
	// observer that maintains them runs under its write lock.
	shards map[pc.ShardID]*shard
	wg     sync.WaitGroup // Of every shard goroutine.
	closed bool           // Set once shards may no longer be started.
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
	if cfg.StateDir == "" {
		cfg.StateDir = filepath.Join(os.TempDir(), "gazconsumer", cfg.ID)
	}
	if cfg.HintsInterval == 0 {
		cfg.HintsInterval = 10 * time.Second
	}
	var spec = &pc.ConsumerSpec{ProcessSpec: pb.ProcessSpec{Id: pb.ProcessSpec_ID{Zone: cfg.Zone, Suffix: cfg.ID}, Endpoint: "http://placeholder:1"}, ShardLimit: cfg.ShardLimit}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("service: member %s: %w", cfg.ID, err)
	}
	if err := os.MkdirAll(cfg.StateDir, 0o750); err != nil {
		return nil, fmt.Errorf("service: creating state directory: %w", err)
	}
	var iface = ""
	if cfg.Host == "127.0.0.1" || cfg.Host == "localhost" {
		iface = "127.0.0.1" // Don't listen beyond loopback when advertising it.
	}
	var srv, err = server.New(iface, cfg.Host, cfg.Port, nil, nil, 4<<20, nil)
	if err != nil {
		return nil, fmt.Errorf("service: %w", err)
	}

	var s = &Service{
		cfg:    cfg,
		ks:     NewKeySpace(cfg.Prefix),
		srv:    srv,
		tasks:  task.NewGroup(context.Background()),
		sigCh:  make(chan os.Signal, 1),
		shards: make(map[pc.ShardID]*shard),
	}
	s.state = allocator.NewObservedState(s.ks, allocator.MemberKey(s.ks, cfg.Zone, cfg.ID), shardIsConsistent)
	s.ks.Observers = append(s.ks.Observers, s.updateLocalShards)
	s.ks.WatchApplyDelay = 10 * time.Millisecond

	var noAuth = auth.NewNoopAuth()
	pc.RegisterShardServer(srv.GRPCServer, pc.NewVerifiedShardServer(&shardAPI{svc: s}, noAuth))
	srv.HTTPMux = http.NewServeMux()
	srv.HTTPMux.Handle("/metrics", promhttp.Handler())
	return s, nil
}

// Endpoint at which the service serves the Shard API.
func (s *Service) Endpoint() pb.Endpoint { return s.srv.Endpoint() }

// KeySpace of the application, as this member observes it.
func (s *Service) KeySpace() *keyspace.KeySpace { return s.ks }

// ID of this member.
func (s *Service) ID() pb.ProcessSpec_ID {
	return pb.ProcessSpec_ID{Zone: s.cfg.Zone, Suffix: s.cfg.ID}
}

// Run announces the member and serves until ctx is done, then exits as
// Gazette members do on SIGTERM: it hands its shards to other members,
// waiting up to handoff for them to take over, and stops. The last member
// stops at once.
func (s *Service) Run(ctx context.Context, handoff time.Duration) error {
	var err = allocator.StartSession(allocator.SessionArgs{
		Etcd:     s.cfg.Etcd,
		Tasks:    s.tasks,
		Spec:     &pc.ConsumerSpec{ProcessSpec: pb.ProcessSpec{Id: s.ID(), Endpoint: s.srv.Endpoint()}, ShardLimit: s.cfg.ShardLimit},
		State:    s.state,
		LeaseTTL: s.cfg.LeaseTTL,
		SignalCh: s.sigCh,
	})
	if err != nil {
		s.srv.CMux.Close()
		return fmt.Errorf("service: member %s: %w", s.cfg.ID, err)
	}
	s.srv.QueueTasks(s.tasks)
	s.tasks.Queue("keyspace.Watch", func() error {
		if err := s.ks.Watch(s.tasks.Context(), s.cfg.Etcd); err != nil && s.tasks.Context().Err() == nil {
			return fmt.Errorf("watching %s: %w", s.cfg.Prefix, err)
		}
		return nil
	})
	s.tasks.Queue("service.Stop", func() error {
		<-s.tasks.Context().Done()
		s.stopShards()
		s.srv.BoundedGracefulStop()
		return nil
	})
	slog.Info("consumer member started", "member", s.cfg.ID, "endpoint", s.srv.Endpoint(), "prefix", s.cfg.Prefix)
	s.tasks.GoRun()

	select {
	case <-ctx.Done():
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
		case <-timer.C:
			slog.Warn("shards were not handed off in time; stopping", "member", s.cfg.ID, "timeout", handoff)
		}
		timer.Stop()
	case <-s.tasks.Context().Done():
	}
	s.tasks.Cancel()
	err = s.tasks.Wait()
	_ = s.srv.GRPCLoopback.Close()
	return err
}

// Abort stops the member at once, as a crash would, without handing off
// its shards. Run then returns.
func (s *Service) Abort() { s.tasks.Cancel() }

// stopShards cancels every local shard and waits for them to tear down.
func (s *Service) stopShards() {
	s.ks.Mu.Lock()
	s.closed = true
	for id, sh := range s.shards {
		sh.cancel()
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
	var next = make(map[pc.ShardID]*shard, len(s.state.LocalItems))
	for _, li := range s.state.LocalItems {
		var asn = li.Assignments[li.Index]
		var item = li.Item.Decoded.(allocator.Item)
		var id = pc.ShardID(item.ID)
		var spec = item.ItemValue.(*pc.ShardSpec)

		var sh, ok = s.shards[id]
		if ok && sh.createRevision() != asn.Raw.CreateRevision && !isPromotion(sh, asn) {
			// The assignment was removed and created anew: start over.
			ok = false
		}
		if !ok {
			sh = newShard(s, spec, asn)
			s.wg.Add(1)
			go sh.serve()
		} else {
			delete(s.shards, id)
		}
		sh.update(spec, asn)
		next[id] = sh
	}
	for _, sh := range s.shards {
		sh.cancel() // No longer assigned here.
	}
	s.shards = next
}

// isPromotion reports whether asn promotes sh's assignment to primary:
// Gazette's allocator promotes a standby by moving its assignment to slot 0.
func isPromotion(sh *shard, asn keyspace.KeyValue) bool {
	return asn.Decoded.(allocator.Assignment).Slot < sh.slot()
}
