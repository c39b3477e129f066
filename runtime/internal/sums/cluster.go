package sums

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/service"
	"github.com/gazconsumer/gazconsumer/specs"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	"go.gazette.dev/core/auth"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// pollInterval is how often a wait polls the state it waits for.
const pollInterval = 20 * time.Millisecond

// Cluster runs members of the sums application on a stack.
type Cluster struct {
	// Stack on which the members run.
	Stack *devstack.Stack
	// Name of the cluster, the root of its journals and etcd keys.
	Name string
	// Shards is the number of shards (and of input journals).
	Shards int
	// StateDir holds the members' local state.
	StateDir string
	// App run by members started hereafter; nil means App{Output: c.Output()}.
	App runtime.Application
	// LeaseTTL of members started hereafter; zero means 3s.
	LeaseTTL time.Duration
	// Handoff is how long a member stopping hands its shards off; zero
	// means 30s.
	Handoff time.Duration
	// DirectFragmentReads of members started hereafter (see
	// service.Config): the process must have installed a file transport
	// of the stack's fragments root.
	DirectFragmentReads bool

	mu      sync.Mutex
	started int
	live    []*Member // Started, and not yet stopped.
	conns   map[pb.Endpoint]*grpc.ClientConn
}

// New returns the cluster name of n shards on stack, applying its journals
// (with fragments of fragmentLength bytes), and keeping its members' state
// under stateDir.
func New(ctx context.Context, stack *devstack.Stack, name string, n int, stateDir string, fragmentLength int64) (*Cluster, error) {
	var c = &Cluster{Stack: stack, Name: name, Shards: n, StateDir: stateDir}
	if _, err := specs.ApplyJournals(ctx, stack.Journals(), "journals of cluster "+name, []byte(c.journals(fragmentLength))); err != nil {
		return nil, err
	}
	return c, nil
}

// Member is a running member of the cluster.
type Member struct {
	Svc *service.Service

	c      *Cluster
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// Start starts a member with id. Its Run returns once Stop or Abort is
// called.
func (c *Cluster) Start(id string) (*Member, error) {
	c.mu.Lock()
	c.started++
	var dir = filepath.Join(c.StateDir, fmt.Sprintf("%s-%d", id, c.started))
	c.mu.Unlock()

	var app = c.App
	if app == nil {
		app = App{Output: c.Output()}
	}
	var svc, err = service.New(service.Config{
		App:           app,
		Etcd:          c.Stack.Etcd(),
		Prefix:        c.Prefix(),
		Journals:      c.Stack.Journals(),
		ID:            id,
		LeaseTTL:      orDefault(c.LeaseTTL, 3*time.Second),
		StateDir:      dir,
		HintsInterval: 200 * time.Millisecond,

		DirectFragmentReads: c.DirectFragmentReads,
	})
	if err != nil {
		return nil, err
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

func orDefault(d, fallback time.Duration) time.Duration {
	if d == 0 {
		return fallback
	}
	return d
}

// ID is the member's ID.
func (m *Member) ID() pb.ProcessSpec_ID { return m.Svc.ID() }

// Stop stops the member gracefully, handing its shards off, and returns
// what Run returned. After Abort, it waits for Run to return.
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

// Live returns the members started and not yet stopped, in start order.
func (c *Cluster) Live() []*Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.live)
}

// Abort stops the member abruptly, as a crash would, and waits for it.
func (m *Member) Abort() error {
	m.Svc.Abort()
	return m.Stop()
}

// ShardClient returns a client of the Shard API of the member at ep.
func (c *Cluster) ShardClient(ep pb.Endpoint) (pc.ShardClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var conn, ok = c.conns[ep]
	if !ok {
		var err error
		if conn, err = grpc.NewClient(ep.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return nil, err
		}
		if c.conns == nil {
			c.conns = make(map[pb.Endpoint]*grpc.ClientConn)
		}
		c.conns[ep] = conn
	}
	return pc.NewAuthShardClient(pc.NewShardClient(conn), auth.NewNoopAuth()), nil
}

// Close closes the cluster's connections to members.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	c.conns = nil
}

// ApplyShards applies the specs of the cluster's shards through m, each
// amended by edit if it's not nil.
func (c *Cluster) ApplyShards(ctx context.Context, m *Member, edit func(*pc.ShardSpec)) error {
	var req = new(pc.ApplyRequest)
	for i := range c.Shards {
		var spec = c.ShardSpec(i)
		if edit != nil {
			edit(spec)
		}
		req.Changes = append(req.Changes, pc.ApplyRequest_Change{Upsert: spec})
	}
	var sc, err = c.ShardClient(m.Svc.Endpoint())
	if err != nil {
		return err
	}
	resp, err := sc.Apply(ctx, req)
	if err == nil && resp.Status != pc.Status_OK {
		err = fmt.Errorf("applying shards: %s", resp.Status)
	}
	return err
}

// List lists the shards through member m.
func (c *Cluster) List(ctx context.Context, m *Member) ([]pc.ListResponse_Shard, error) {
	var sc, err = c.ShardClient(m.Svc.Endpoint())
	if err != nil {
		return nil, err
	}
	resp, err := sc.List(ctx, &pc.ListRequest{})
	if err != nil {
		return nil, err
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
		if err := sleep(ctx, pollInterval); err != nil {
			return nil, fmt.Errorf("shard %s has no primary among the live members: %w", id, err)
		}
	}
}

// WaitCaughtUp waits until each shard's primary has committed its reads
// through its source's current write head.
func (c *Cluster) WaitCaughtUp(ctx context.Context) error {
	for i := range c.Shards {
		var head, err = WriteHead(ctx, c.Stack.Journals(), c.Input(i))
		if err != nil {
			return err
		}
		if err = c.WaitReadThrough(ctx, i, head); err != nil {
			return err
		}
	}
	return nil
}

// WaitReadThrough waits until shard i's primary has committed its reads of
// its source through offset.
func (c *Cluster) WaitReadThrough(ctx context.Context, i int, offset pb.Offset) error {
	for {
		var m, err = c.PrimaryOf(ctx, ShardID(i))
		if err != nil {
			return err
		}
		sc, err := c.ShardClient(m.Svc.Endpoint())
		if err != nil {
			return err
		}
		resp, err := sc.Stat(ctx, &pc.StatRequest{Shard: ShardID(i), ReadThrough: pb.Offsets{c.Input(i): offset}})
		if err == nil && resp.Status == pc.Status_OK {
			return nil
		} else if ctx.Err() != nil {
			return fmt.Errorf("shard %s did not read %s through %d: %w", ShardID(i), c.Input(i), offset, ctx.Err())
		}
		// The primary moved, or stopped: look for it again.
		if err = sleep(ctx, pollInterval); err != nil {
			return err
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

// Feed publishes Adds to the shards' inputs, committed, and keeps the sums
// they add up to.
type Feed struct {
	pub    *message.Publisher
	shards int
	input  func(int) pb.Journal
	// Pad is the size of the Pad of each message published hereafter.
	Pad int

	mu   sync.Mutex
	want map[string]int64
	n    int
	cond chan struct{} // Closed and replaced as n grows.
}

// NewFeed returns a Feed to the cluster's inputs, which publishes until ctx
// is done.
func (c *Cluster) NewFeed(ctx context.Context) *Feed {
	return &Feed{
		pub:    message.NewPublisher(client.NewAppendService(ctx, c.Stack.Journals()), nil),
		shards: c.Shards,
		input:  c.Input,
		want:   make(map[string]int64),
		cond:   make(chan struct{}),
	}
}

// Publish publishes n messages, spread round-robin over the inputs, and
// waits until their appends are committed.
func (f *Feed) Publish(n int) error {
	var last = make(map[pb.Journal]*client.AsyncAppend)
	var adds = make(map[string]int64)
	var pad []byte
	if f.Pad != 0 {
		pad = make([]byte, f.Pad)
	}
	f.mu.Lock()
	var first = f.n
	f.mu.Unlock()

	for i := first; i != first+n; i++ {
		var m = &Add{Key: fmt.Sprintf("key-%d", i%7), Value: int64(i)}
		if pad != nil {
			// Incompressible, so that the state is as large as its pads.
			binary.LittleEndian.PutUint64(pad, uint64(i))
			for j := 8; j+8 <= len(pad); j += 8 {
				binary.LittleEndian.PutUint64(pad[j:], binary.LittleEndian.Uint64(pad[j-8:])*6364136223846793005+1442695040888963407)
			}
			m.Pad = pad
		}
		var journal = f.input(i % f.shards)
		var aa, err = f.pub.PublishCommitted(func(message.Mappable) (pb.Journal, string, error) {
			return journal, ContentType, nil
		}, m)
		if err != nil {
			return fmt.Errorf("publishing to %s: %w", journal, err)
		}
		last[journal] = aa
		adds[m.Key] += m.Value
	}
	for journal, aa := range last {
		if err := aa.Err(); err != nil {
			return fmt.Errorf("appending to %s: %w", journal, err)
		}
	}
	f.mu.Lock()
	for k, v := range adds {
		f.want[k] += v
	}
	f.n += n
	close(f.cond)
	f.cond = make(chan struct{})
	f.mu.Unlock()
	return nil
}

// Published is the number of messages published and committed.
func (f *Feed) Published() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// WaitPublished waits until at least n messages are published.
func (f *Feed) WaitPublished(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		var got, cond = f.n, f.cond
		f.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-cond:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %d published messages (have %d): %w", n, got, ctx.Err())
		}
	}
}

// Want returns the sums of the messages published.
func (f *Feed) Want() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out = make(map[string]int64, len(f.want))
	for k, v := range f.want {
		out[k] = v
	}
	return out
}

// Flow publishes batches of batch messages until stop is called, which
// returns the first error of a batch.
func (f *Feed) Flow(batch int) (stop func() error) {
	var done = make(chan struct{})
	var errCh = make(chan error, 1)
	go func() {
		for {
			select {
			case <-done:
				errCh <- nil
				return
			default:
			}
			if err := f.Publish(batch); err != nil {
				errCh <- err
				return
			}
		}
	}()
	return func() error {
		close(done)
		return <-errCh
	}
}

// StoreSums plays shard i's recovery log into a new directory under dir,
// opens its store and returns the sums it holds. Members must be stopped.
func (c *Cluster) StoreSums(ctx context.Context, i int) (map[string]int64, error) {
	var spec = c.ShardSpec(i)
	var hints, err = recoverylog.FetchHints(ctx, c.Stack.Etcd(), spec.HintPrimaryKey(), 1)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(c.StateDir, "play-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	var author = recoverylog.Author(0xfeed + i)
	var player = recoverylog.NewPlayer(c.Stack.Journals(), spec.RecoveryLog(), dir, author)
	player.FinishAtWriteHead()
	fsm, err := player.Play(ctx, hints[0])
	if err != nil {
		return nil, err
	}
	rec, err := recoverylog.NewRecorder(spec.RecoveryLog(), fsm, author, dir, client.NewAppendService(ctx, c.Stack.Journals()))
	if err != nil {
		return nil, err
	}
	st, err := rocks.Open(dir, rec, rocks.Options{})
	if err != nil {
		return nil, err
	}
	defer st.Destroy()
	var out = make(map[string]int64)
	err = st.KV().Scan([]byte("key-"), []byte("key."), func(k, v []byte) bool {
		if len(v) == 8 {
			out[string(k)] = int64(binary.BigEndian.Uint64(v))
		}
		return true
	})
	return out, err
}

// AllStoreSums is the sum of StoreSums over the shards.
func (c *Cluster) AllStoreSums(ctx context.Context) (map[string]int64, error) {
	var all = make(map[string]int64)
	for i := range c.Shards {
		var sums, err = c.StoreSums(ctx, i)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", ShardID(i), err)
		}
		for k, v := range sums {
			all[k] += v
		}
	}
	return all, nil
}

// OutputSums reads the output through its write head, read-committed, and
// returns the sums of the additions it holds and their number.
func (c *Cluster) OutputSums(ctx context.Context) (map[string]int64, int, error) {
	var jc = c.Stack.Journals()
	var head, err = WriteHead(ctx, jc, c.Output())
	if err != nil {
		return nil, 0, err
	}
	var rr = client.NewRetryReader(ctx, jc, pb.ReadRequest{Journal: c.Output(), EndOffset: head})
	var it = message.NewReadCommittedIter(rr, App{}.NewMessage, message.NewSequencer(nil, nil, 1024))
	var sums = make(map[string]int64)
	var n int
	for {
		var env, err = it.Next()
		if errors.Is(err, io.EOF) {
			return sums, n, nil
		} else if err != nil {
			return nil, 0, fmt.Errorf("reading %s: %w", c.Output(), err)
		}
		if message.GetFlags(env.Message.GetUUID()) == message.Flag_ACK_TXN {
			continue
		}
		var m = env.Message.(*Add)
		sums[m.Key] += m.Value
		n++
	}
}
