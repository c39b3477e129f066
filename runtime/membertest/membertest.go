// Package membertest runs members of a consumer application on an
// in-process stack of etcd and Gazette brokers (package devstack), for
// tests of applications and of the runtime, as Gazette's consumertest does
// for Gazette's consumers: start members, apply shards through a member's
// Shard API, stop a member (handing its shards off) or kill it (as a crash
// would), and wait for a shard's status or progress.
//
// For tests of a consumer's handlers without a stack, see package
// runtime/consumertest.
package membertest

import (
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	"github.com/gazconsumer/gazconsumer/runtime/replica"
	"github.com/gazconsumer/gazconsumer/runtime/service"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/auth"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// PollInterval is how often a wait polls the state it waits for.
const PollInterval = 20 * time.Millisecond

// Cluster runs members of an application on a stack. Its fields configure
// the members started after they are set.
type Cluster struct {
	// Stack on which the members run.
	Stack *devstack.Stack
	// Prefix in etcd of the application's members, shards and assignments.
	Prefix string
	// StateDir holds the members' local state, a directory each.
	StateDir string
	// App is the application the members run.
	App runtime.Application
	// LeaseTTL of the members' etcd leases; zero means 3s.
	LeaseTTL time.Duration
	// Handoff is how long a member stopping hands its shards off; zero
	// means 30s.
	Handoff time.Duration
	// HintsInterval is how often shards store their recovery-log hints;
	// zero means 200ms.
	HintsInterval time.Duration
	// HintsGrowth and MinHintsGrowth have shards store their hints sooner
	// as their recovery logs grow (see replica.Config); zero means their
	// defaults.
	HintsGrowth    float64
	MinHintsGrowth int64
	// DirectFragmentReads lets members read persisted fragments of recovery
	// logs from the stack's fragment store (see service.Config), if the
	// process installed a file transport of its root
	// (client.InstallFileTransport(Stack.FragmentsRoot())); else they find
	// they can't, and read through the brokers. They map the fragment files
	// under Stack.FragmentsRoot() (see recoverylog.Player's FileRoot).
	DirectFragmentReads bool
	// Verifier verifies the authorization of calls of the members' Shard
	// API and queries (see service.Config); nil verifies none.
	Verifier pb.Verifier
	// Authorizer authorizes the cluster's calls of the Shard API (Apply,
	// List, Stat), and the queries members proxy; nil authorizes none.
	Authorizer pb.Authorizer
	// ServerTLS and PeerTLS, if set, serve the members' port over TLS (see
	// service.Config; each member has a clone). The cluster's own calls
	// present PeerTLS.
	ServerTLS, PeerTLS *tls.Config
	// ReadyIgnoresFailed keeps members ready while their shards are
	// FAILED (see service.Config).
	ReadyIgnoresFailed bool
	// Services, if set, registers the application's own gRPC services
	// with each member's Registrar (see service.Config).
	Services func(*service.Registrar)

	mu      sync.Mutex
	started int
	live    []*Member // Started, and not yet stopped.
	conns   map[pb.Endpoint]*grpc.ClientConn
}

// New returns a Cluster of the members of app under prefix on stack, which
// keep their state under stateDir.
func New(stack *devstack.Stack, prefix string, app runtime.Application, stateDir string) *Cluster {
	return &Cluster{Stack: stack, Prefix: prefix, App: app, StateDir: stateDir}
}

// Member is a running member of a Cluster.
type Member struct {
	// Svc is the member's service.
	Svc *service.Service

	c      *Cluster
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// Start starts a member with id, which runs until Stop or Kill.
func (c *Cluster) Start(id string) (*Member, error) {
	c.mu.Lock()
	c.started++
	var dir = filepath.Join(c.StateDir, fmt.Sprintf("%s-%d", id, c.started))
	c.mu.Unlock()

	var services *service.Registrar
	if c.Services != nil {
		services = service.NewRegistrar()
		c.Services(services)
	}
	var svc, err = service.New(service.Config{
		App:      c.App,
		Services: services,
		Etcd:     c.Stack.Etcd(),
		Prefix:   c.Prefix,
		Journals: c.Stack.Journals(),
		ID:       id,
		LeaseTTL: orDefault(c.LeaseTTL, 3*time.Second),
		Replicas: replica.Config{
			StateDir:            dir,
			HintsInterval:       orDefault(c.HintsInterval, 200*time.Millisecond),
			HintsGrowth:         c.HintsGrowth,
			MinHintsGrowth:      c.MinHintsGrowth,
			DirectFragmentReads: c.DirectFragmentReads,
			FileRoot:            c.Stack.FragmentsRoot(),
		},
		Verifier:           c.Verifier,
		Authorizer:         c.Authorizer,
		ServerTLS:          cloneTLS(c.ServerTLS),
		PeerTLS:            cloneTLS(c.PeerTLS),
		ReadyIgnoresFailed: c.ReadyIgnoresFailed,
	})
	if err != nil {
		return nil, fmt.Errorf("starting member %s: %w", id, err)
	}
	var ctx, cancel = context.WithCancel(context.Background())
	var m = &Member{Svc: svc, c: c, cancel: cancel, done: make(chan error, 1)}
	c.mu.Lock()
	c.live = append(c.live, m)
	c.mu.Unlock()
	var handoff = orDefault(c.Handoff, 30*time.Second)
	go func() { m.done <- svc.Run(ctx, handoff) }()
	return m, nil
}

func cloneTLS(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	return c.Clone()
}

func orDefault(d, fallback time.Duration) time.Duration {
	if d == 0 {
		return fallback
	}
	return d
}

// ID is the member's ID.
func (m *Member) ID() pb.ProcessSpec_ID { return m.Svc.ID() }

// Stop stops the member gracefully, handing its shards off to their hot
// standbys, and returns what its service's Run returned. After Kill, it
// waits for Run to return.
func (m *Member) Stop() error {
	m.once.Do(func() {
		m.cancel()
		m.err = <-m.done
		m.c.mu.Lock()
		m.c.live = slices.DeleteFunc(m.c.live, func(l *Member) bool { return l == m })
		m.c.mu.Unlock()
	})
	return m.err
}

// Kill stops the member abruptly, as a crash would: it neither hands its
// shards off nor revokes its lease, whose expiry fails its shards over. It
// waits for the member to stop.
func (m *Member) Kill() error {
	m.Svc.Abort()
	return m.Stop()
}

// Live returns the members started and not yet stopped, in start order.
func (c *Cluster) Live() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.live)
}

// ShardClient returns a client of the Shard API of the member serving at
// ep, which need not be one of the cluster's.
func (c *Cluster) ShardClient(ep pb.Endpoint) (pc.ShardClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var conn, ok = c.conns[ep]
	if !ok {
		var err error
		var creds = insecure.NewCredentials()
		if c.PeerTLS != nil {
			creds = credentials.NewTLS(c.PeerTLS.Clone())
		}
		if conn, err = grpc.NewClient(ep.GRPCAddr(), grpc.WithTransportCredentials(creds)); err != nil {
			return nil, fmt.Errorf("dialing %s: %w", ep, err)
		}
		if c.conns == nil {
			c.conns = make(map[pb.Endpoint]*grpc.ClientConn)
		}
		c.conns[ep] = conn
	}
	var authorizer = c.Authorizer
	if authorizer == nil {
		authorizer = auth.NewNoopAuth()
	}
	return pc.NewAuthShardClient(pc.NewShardClient(conn), authorizer), nil
}

// Close closes the cluster's connections to members. It stops no member.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// Apply applies specs through the Shard API of member m.
func (c *Cluster) Apply(ctx context.Context, m *Member, specs ...*pc.ShardSpec) error {
	var req = new(pc.ApplyRequest)
	for _, spec := range specs {
		req.Changes = append(req.Changes, pc.ApplyRequest_Change{Upsert: spec})
	}
	var sc, err = c.ShardClient(m.Svc.Endpoint())
	if err != nil {
		return err
	}
	resp, err := sc.Apply(ctx, req)
	if err == nil && resp.Status != pc.Status_OK {
		err = fmt.Errorf("status %s", resp.Status)
	}
	if err != nil {
		return fmt.Errorf("applying shards through %s: %w", m.ID().Suffix, err)
	}
	return nil
}

// List lists the shards through member m.
func (c *Cluster) List(ctx context.Context, m *Member) ([]pc.ListResponse_Shard, error) {
	var sc, err = c.ShardClient(m.Svc.Endpoint())
	if err != nil {
		return nil, err
	}
	resp, err := sc.List(ctx, &pc.ListRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing shards through %s: %w", m.ID().Suffix, err)
	}
	return resp.Shards, nil
}

// PrimaryOf waits until a live member is the PRIMARY of shard id, as
// listed by a live member, and returns it.
func (c *Cluster) PrimaryOf(ctx context.Context, id pc.ShardID) (*Member, error) {
	for {
		var live = c.Live()
		for _, lister := range live {
			var shards, err = c.List(ctx, lister)
			if err != nil {
				continue // It may be stopping: ask another.
			}
			for _, s := range shards {
				if s.Spec.Id != id || s.Route.Primary == -1 || s.Status[s.Route.Primary].Code != pc.ReplicaStatus_PRIMARY {
					continue
				}
				for _, m := range live {
					if s.Route.Members[s.Route.Primary] == m.ID() {
						return m, nil
					}
				}
			}
			break
		}
		if err := sleep(ctx, PollInterval); err != nil {
			return nil, fmt.Errorf("shard %s has no primary among the live members: %w", id, err)
		}
	}
}

// WaitReadThrough waits until the primary of shard id has committed its
// reads of each journal of offsets through its offset.
func (c *Cluster) WaitReadThrough(ctx context.Context, id pc.ShardID, offsets pb.Offsets) error {
	for {
		var m, err = c.PrimaryOf(ctx, id)
		if err != nil {
			return err
		}
		sc, err := c.ShardClient(m.Svc.Endpoint())
		if err != nil {
			return err
		}
		resp, err := sc.Stat(ctx, &pc.StatRequest{Shard: id, ReadThrough: offsets})
		if err == nil && resp.Status == pc.Status_OK {
			return nil
		} else if ctx.Err() != nil {
			return fmt.Errorf("shard %s did not read through %v: %w", id, offsets, ctx.Err())
		}
		// The primary moved, or stopped: look for it again.
		if err = sleep(ctx, PollInterval); err != nil {
			return err
		}
	}
}

// WaitStatus waits until the assignment of shard id to member has status
// code, and returns the status: PRIMARY, STANDBY, or FAILED, with its
// errors.
func (c *Cluster) WaitStatus(ctx context.Context, id pc.ShardID, member pb.ProcessSpec_ID, code pc.ReplicaStatus_Code) (pc.ReplicaStatus, error) {
	return WaitStatus(ctx, c.Stack.Etcd(), c.Prefix, id, member, code)
}

// WaitStatus waits until the assignment of shard id to member, of the
// application under prefix in etcd, has status code, and returns the
// status. It reads the assignments in etcd, whichever process runs the
// member.
func WaitStatus(ctx context.Context, etcd *clientv3.Client, prefix string, id pc.ShardID, member pb.ProcessSpec_ID, code pc.ReplicaStatus_Code) (pc.ReplicaStatus, error) {
	var assignments = allocator.ItemAssignmentsPrefix(groupkeys.NewKeySpace(prefix), id.String())
	var of = assignments + member.Zone + "#" + member.Suffix + "#"
	for {
		var resp, err = etcd.Get(ctx, assignments, clientv3.WithPrefix())
		if err != nil {
			return pc.ReplicaStatus{}, fmt.Errorf("reading the assignments of shard %s: %w", id, err)
		}
		for _, kv := range resp.Kvs {
			var st pc.ReplicaStatus
			if strings.HasPrefix(string(kv.Key), of) && st.Unmarshal(kv.Value) == nil && st.Code == code {
				return st, nil
			}
		}
		if err = sleep(ctx, PollInterval); err != nil {
			return pc.ReplicaStatus{}, fmt.Errorf("shard %s is not %s on member %s: %w", id, code, member.Suffix, err)
		}
	}
}

// WaitStandbys waits until every hot standby that the spec of shard id asks
// for tails its recovery log: as many of its assignments have status
// STANDBY (a standby is BACKFILL while it plays the log up to its head),
// and every live member's view of etcd shows it, as its Shard API and
// metrics report it.
func (c *Cluster) WaitStandbys(ctx context.Context, id pc.ShardID) error {
	var rev, err = WaitStandbys(ctx, c.Stack.Etcd(), c.Prefix, id)
	if err != nil {
		return err
	}
	return c.waitLiveAt(ctx, rev)
}

// WaitSeen waits until every live member's view of etcd (its KeySpace) is
// as recent as etcd is when it's called: each then routes, and lists, by
// the specs and assignments written before.
func (c *Cluster) WaitSeen(ctx context.Context) error {
	var resp, err = c.Stack.Etcd().Get(ctx, c.Prefix, clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("reading etcd's revision: %w", err)
	}
	return c.waitLiveAt(ctx, resp.Header.Revision)
}

// waitLiveAt waits until every live member's KeySpace holds what etcd held
// under its root at revision rev: until it reached rev, or holds the same
// keys at the same revisions. (rev is etcd's, which writes outside the
// root advance too, and a KeySpace advances only by the events under its
// root: one which saw the last of those may never reach rev.)
func (c *Cluster) waitLiveAt(ctx context.Context, rev int64) error {
	for _, m := range c.Live() {
		var ks = m.Svc.KeySpace()
		var resp, err = c.Stack.Etcd().Get(ctx, ks.Root, clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithKeysOnly())
		if err != nil {
			return fmt.Errorf("reading %s at etcd revision %d: %w", ks.Root, rev, err)
		}
		for {
			ks.Mu.RLock()
			var seen, same = ks.Header.Revision, ks.Header.Revision >= rev || sameKeys(ks.KeyValues, resp.Kvs)
			if !same {
				// Until the KeySpace applies more, or a poll's while.
				var waitCtx, cancel = context.WithTimeout(ctx, PollInterval)
				_ = ks.WaitForRevision(waitCtx, seen+1)
				cancel()
			}
			ks.Mu.RUnlock()
			if same {
				break
			} else if ctx.Err() != nil {
				return fmt.Errorf("member %s seeing etcd revision %d (it saw %d): %w", m.ID().Suffix, rev, seen, ctx.Err())
			}
		}
	}
	return nil
}

// sameKeys reports whether kvs, of a KeySpace, are the keys of want at the
// same revisions.
func sameKeys(kvs keyspace.KeyValues, want []*mvccpb.KeyValue) bool {
	return slices.EqualFunc(kvs, want, func(kv keyspace.KeyValue, w *mvccpb.KeyValue) bool {
		return string(kv.Raw.Key) == string(w.Key) && kv.Raw.ModRevision == w.ModRevision
	})
}

// WaitStandbys waits until every hot standby that the spec of shard id, of
// the application under prefix in etcd, asks for has status STANDBY, and
// returns the etcd revision at which they had.
func WaitStandbys(ctx context.Context, etcd *clientv3.Client, prefix string, id pc.ShardID) (int64, error) {
	var ks = groupkeys.NewKeySpace(prefix)
	var item, assignments = allocator.ItemKey(ks, id.String()), allocator.ItemAssignmentsPrefix(ks, id.String())
	for {
		var spec pc.ShardSpec
		var standbys int
		var resp, err = etcd.Txn(ctx).Then(clientv3.OpGet(item), clientv3.OpGet(assignments, clientv3.WithPrefix())).Commit()
		if err != nil {
			return 0, fmt.Errorf("reading shard %s and its assignments: %w", id, err)
		}
		var items, assigned = resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
		if len(items) != 0 {
			if err = spec.Unmarshal(items[0].Value); err != nil {
				return 0, fmt.Errorf("decoding the spec of shard %s: %w", id, err)
			}
		}
		for _, kv := range assigned {
			var st pc.ReplicaStatus
			if st.Unmarshal(kv.Value) == nil && st.Code == pc.ReplicaStatus_STANDBY {
				standbys++
			}
		}
		if len(items) != 0 && standbys >= int(spec.HotStandbys) {
			return resp.Header.Revision, nil
		}
		if err = sleep(ctx, PollInterval); err != nil {
			return 0, fmt.Errorf("shard %s has %d of its %d standbys STANDBY: %w", id, standbys, spec.HotStandbys, err)
		}
	}
}

// WriteHead returns the write head of journal.
func WriteHead(ctx context.Context, jc pb.RoutedJournalClient, journal pb.Journal) (pb.Offset, error) {
	var resp, err = client.Append(ctx, jc, pb.AppendRequest{Journal: journal})
	if err != nil {
		return 0, fmt.Errorf("write head of %s: %w", journal, err)
	}
	return resp.Commit.End, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
