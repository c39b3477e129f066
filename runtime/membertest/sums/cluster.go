package sums

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/sequence"
	"github.com/gazconsumer/gazconsumer/specs"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
)

// Cluster runs members of the sums application on a stack: a
// membertest.Cluster, with the journals of its shards.
type Cluster struct {
	*membertest.Cluster
	// Name of the cluster, the root of its journals and etcd keys.
	Name string
	// Shards is the number of shards (and of input journals).
	Shards int
}

// New returns the cluster name of n shards on stack, applying its journals
// (with fragments of fragmentLength bytes), and keeping its members' state
// under stateDir. Its members run App{Output: c.Output()}.
func New(ctx context.Context, stack *devstack.Stack, name string, n int, stateDir string, fragmentLength int64) (*Cluster, error) {
	var c = &Cluster{Name: name, Shards: n}
	c.Cluster = membertest.New(stack, "/gazette/consumers/"+name, App{Output: c.Output()}, stateDir)
	if _, err := specs.ApplyJournals(ctx, stack.Journals(), "journals of cluster "+name, []byte(c.journals(fragmentLength))); err != nil {
		return nil, err
	}
	return c, nil
}

// ApplyShards applies the specs of the cluster's shards through m, each
// amended by edit if it's not nil.
func (c *Cluster) ApplyShards(ctx context.Context, m *membertest.Member, edit func(*pc.ShardSpec)) error {
	var all []*pc.ShardSpec
	for i := range c.Shards {
		var spec = c.ShardSpec(i)
		if edit != nil {
			edit(spec)
		}
		all = append(all, spec)
	}
	return c.Apply(ctx, m, all...)
}

// WaitCaughtUp waits until each shard's primary has committed its reads
// through its source's current write head.
func (c *Cluster) WaitCaughtUp(ctx context.Context) error {
	for i := range c.Shards {
		var head, err = membertest.WriteHead(ctx, c.Stack.Journals(), c.Input(i))
		if err != nil {
			return err
		}
		if err = c.WaitReadThrough(ctx, ShardID(i), pb.Offsets{c.Input(i): head}); err != nil {
			return err
		}
	}
	return nil
}

// WaitStandbys waits until each shard's hot standbys tail its recovery
// log (membertest.Cluster.WaitStandbys).
func (c *Cluster) WaitStandbys(ctx context.Context) error {
	for i := range c.Shards {
		if err := c.Cluster.WaitStandbys(ctx, ShardID(i)); err != nil {
			return err
		}
	}
	return nil
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
	var head, err = membertest.WriteHead(ctx, jc, c.Output())
	if err != nil {
		return nil, 0, err
	}
	var rr = client.NewRetryReader(ctx, jc, pb.ReadRequest{Journal: c.Output(), EndOffset: head})
	var it = sequence.ReadCommitted(rr, App{}.NewMessage, 1024)
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
