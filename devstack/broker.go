package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/broker"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/keyspace"
	"go.gazette.dev/core/server"
	"go.gazette.dev/core/task"
)

// Broker is one Gazette broker of a Stack, served from this process.
type Broker struct {
	stack *Stack
	state *allocator.State
	id    pb.ProcessSpec_ID
	srv   *server.Server
	tasks *task.Group
	sigCh chan os.Signal

	closeOnce sync.Once
	closeErr  error
}

// maxGRPCRecvSize matches `gazette serve`'s default.
const maxGRPCRecvSize = 4 << 20

func startBroker(ctx context.Context, s *Stack, index, port int) (*Broker, error) {
	var portStr = ""
	if port != 0 {
		portStr = strconv.Itoa(port)
	}
	var srv, err = server.New("127.0.0.1", "127.0.0.1", portStr, s.serverTLS, s.peerTLS, maxGRPCRecvSize, nil)
	if err != nil {
		return nil, fmt.Errorf("devstack: broker %d: %w", index, err)
	}

	var (
		id    = pb.ProcessSpec_ID{Zone: s.opts.Zone, Suffix: fmt.Sprintf("broker-%d", index)}
		ks    = broker.NewKeySpace(s.opts.EtcdPrefix)
		state = allocator.NewObservedState(ks, allocator.MemberKey(ks, id.Zone, id.Suffix), broker.JournalIsConsistent)
		lo    = pb.NewAuthJournalClient(pb.NewJournalClient(srv.GRPCLoopback), s.authorizer)
		svc   = broker.NewService(state, lo, s.etcdClient)
		b     = &Broker{stack: s, state: state, id: id, srv: srv, tasks: task.NewGroup(context.Background()), sigCh: make(chan os.Signal, 1)}
	)
	pb.RegisterJournalServer(srv.GRPCServer, appendLoggingServer{
		JournalServer: pb.NewVerifiedJournalServer(svc, s.verifier), log: s.appends, admit: s.admitAppend,
	})

	srv.HTTPMux = http.NewServeMux()
	srv.HTTPMux.Handle("/metrics", promhttp.Handler())
	srv.HTTPMux.Handle("/", s.gateway(srv.GRPCLoopback))
	ks.WatchApplyDelay = 10 * time.Millisecond
	// Before the broker's replicas see an update (the allocator's observer
	// of ks, which resolves them), the shared persister sees it too.
	ks.Observers = append([]func(){s.persisterFollows(ks)}, ks.Observers...)

	err = allocator.StartSession(allocator.SessionArgs{
		Etcd:     s.etcdClient,
		Tasks:    b.tasks,
		Spec:     &pb.BrokerSpec{ProcessSpec: pb.ProcessSpec{Id: id, Endpoint: srv.Endpoint()}, JournalLimit: s.opts.JournalLimit},
		State:    state,
		LeaseTTL: s.opts.LeaseTTL,
		SignalCh: b.sigCh,
	})
	if err != nil {
		_ = srv.GRPCLoopback.Close()
		srv.CMux.Close()
		return nil, fmt.Errorf("devstack: broker %s: starting allocator session: %w", id.Suffix, err)
	}
	srv.QueueTasks(b.tasks)
	// The stack, not the broker, finishes the shared persister.
	svc.QueueTasks(b.tasks, srv, nil)
	b.tasks.GoRun()

	var waitCtx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err = waitForMember(waitCtx, ks, state.LocalKey); err != nil {
		_ = b.stop(false)
		return nil, fmt.Errorf("devstack: broker %s did not announce itself: %w", id.Suffix, err)
	}
	return b, nil
}

// ID of the broker.
func (b *Broker) ID() pb.ProcessSpec_ID { return b.id }

// Endpoint at which the broker serves gRPC and HTTP.
func (b *Broker) Endpoint() pb.Endpoint { return b.srv.Endpoint() }

// Close stops the broker as SIGTERM stops `gazette serve`: it hands its
// journals to the other live brokers of the stack, then exits. Gazette never
// drops the last replica of a journal, so the last live broker of a stack (or
// one whose handoff takes longer than HandoffTimeout) stops without handoff:
// its replicas complete their fragments, which the stack persists. Close
// blocks until the broker's goroutines have exited; it is safe to call more
// than once.
func (b *Broker) Close() error {
	return b.stop(!b.stack.lastLive(b))
}

// Kill stops the broker at once, as a crash would, without handing off its
// journals: its etcd lease is revoked (where a crashed broker's would expire)
// and the allocator reassigns its journals to the remaining brokers. Unlike
// a crash, the fragments its replicas hold are still persisted.
func (b *Broker) Kill() error { return b.stop(false) }

// revokeLease revokes the broker's etcd lease, removing its announcement and
// assignments, and waits until the broker has seen it. An append that was
// waiting on the broker's assignments then fails at once and releases its
// journal's pipeline, which the broker's shutdown needs: without this, it
// would hold it until its own timeout. It reports whether it revoked the
// lease (the broker's session then fails, as it should).
func (b *Broker) revokeLease() bool {
	var ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var etcd = b.stack.etcdClient
	var resp, err = etcd.Get(ctx, b.state.LocalKey)
	if err != nil || len(resp.Kvs) == 0 || resp.Kvs[0].Lease == 0 {
		return false
	}
	revoke, err := etcd.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	if err != nil {
		slog.Warn("revoking a stopping broker's lease", "broker", b.id.Suffix, "err", err)
		return false
	}
	b.state.KS.Mu.RLock()
	_ = b.state.KS.WaitForRevision(ctx, revoke.Header.Revision)
	b.state.KS.Mu.RUnlock()
	return true
}

// HandoffTimeout bounds how long Broker.Close waits for a broker's journals
// to move to other brokers before it stops the broker regardless.
var HandoffTimeout = 30 * time.Second

func (b *Broker) stop(handoff bool) error {
	b.closeOnce.Do(func() {
		var handedOff bool
		if handoff {
			b.sigCh <- syscall.SIGTERM
			var timer = time.NewTimer(HandoffTimeout)
			select {
			case <-b.tasks.Context().Done(): // The allocator discharged every journal.
				handedOff = true
			case <-timer.C:
				slog.Warn("broker did not hand off its journals in time; stopping it", "broker", b.id.Suffix, "timeout", HandoffTimeout)
			}
			timer.Stop()
		}
		var revoked = !handedOff && b.revokeLease()
		b.tasks.Cancel()
		if err := b.tasks.Wait(); err != nil && !revoked {
			b.closeErr = fmt.Errorf("devstack: broker %s: %w", b.id.Suffix, err)
		}
		b.stack.markClosed(b)
	})
	return b.closeErr
}

// persisterLagLimit bounds how long a broker's KeySpace waits for the shared
// persister's (persisterFollows).
const persisterLagLimit = 10 * time.Second

// persisterFollows returns an observer of ks, a broker's KeySpace, which
// holds each update of ks (and so the broker, whose replicas serve appends
// by it) until the stack's persister's KeySpace holds every key version ks
// does. The shared persister drops a completed fragment of a journal its own
// KeySpace doesn't hold ("JournalSpec was removed"): under load its watch
// lagged the brokers', and the first fragments of a journal just created went
// unpersisted for good (2 of 59 runs of a test under load, and in CI).
func (s *Stack) persisterFollows(ks *keyspace.KeySpace) func() {
	return func() {
		var newest int64
		for _, kv := range ks.KeyValues {
			newest = max(newest, kv.Raw.ModRevision)
		}
		var ctx, cancel = context.WithTimeout(s.tasks.Context(), persisterLagLimit)
		defer cancel()
		if err := s.persisterSees(ctx, newest); err != nil && s.tasks.Context().Err() == nil {
			slog.Warn("devstack: the fragment persister lags a broker's journal specs; fragments completed meanwhile may go unpersisted",
				"revision", newest, "waited", persisterLagLimit, "err", err)
		}
	}
}
