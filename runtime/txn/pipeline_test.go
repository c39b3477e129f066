package txn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/sequence"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
	"go.gazette.dev/core/message"
)

// fakeClock is a Clock whose time moves only when a test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at      time.Time
	ch      chan time.Time
	stopped bool
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Timer(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t = &fakeTimer{at: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	return t.ch, func() {
		c.mu.Lock()
		t.stopped = true
		c.mu.Unlock()
	}
}

// pending reports whether a timer set for d from now is neither stopped
// nor fired.
func (c *fakeClock) pending(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.timers {
		if !t.stopped && t.at.Equal(c.now.Add(d)) {
			return true
		}
	}
	return false
}

// Advance moves time forward by d and fires the timers due by then.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	var live = c.timers[:0]
	for _, t := range c.timers {
		if t.stopped {
			continue
		} else if !t.at.After(c.now) {
			t.ch <- c.now
		} else {
			live = append(live, t)
		}
	}
	c.timers = live
}

// testMsg is a journal message of the tests.
type testMsg struct {
	uuid message.UUID
	Key  string
}

func (m *testMsg) GetUUID() message.UUID                         { return m.uuid }
func (m *testMsg) SetUUID(u message.UUID)                        { m.uuid = u }
func (m *testMsg) NewAcknowledgement(pb.Journal) message.Message { return &testMsg{} }

type testShard struct{ ctx context.Context }

func (s testShard) Context() context.Context                 { return s.ctx }
func (s testShard) Spec() *pc.ShardSpec                      { return &pc.ShardSpec{Id: "test/shard"} }
func (s testShard) Assignment() keyspace.KeyValue            { return keyspace.KeyValue{} }
func (s testShard) JournalClient() client.AsyncJournalClient { return nil }

// testStore hands out commit futures that the test resolves.
type testStore struct {
	commits chan *client.AsyncOperation
	cps     chan pc.Checkpoint
	failNow error // If set, StartCommit fails at once.
}

func (s *testStore) RestoreCheckpoint(runtime.Shard) (pc.Checkpoint, error) {
	return pc.Checkpoint{}, nil
}
func (s *testStore) Destroy() {}
func (s *testStore) StartCommit(_ runtime.Shard, cp pc.Checkpoint, _ client.OpFutures) client.OpFuture {
	if s.failNow != nil {
		return client.FinishedOperation(s.failNow)
	}
	var op = client.NewAsyncOperation()
	s.cps <- cp
	s.commits <- op
	return op
}

// testApp reports each call on events.
type testApp struct {
	events     chan string
	consumeErr error
	finishErrs chan error
}

func (a *testApp) NewStore(runtime.Shard, runtime.Recorder) (runtime.Store, error) { return nil, nil }
func (a *testApp) NewMessage(*pb.JournalSpec) (message.Message, error)             { return &testMsg{}, nil }
func (a *testApp) ConsumeMessage(_ runtime.Shard, _ runtime.Store, env message.Envelope, _ *message.Publisher) error {
	a.events <- "consume " + env.Message.(*testMsg).Key
	return a.consumeErr
}
func (a *testApp) FinalizeTxn(runtime.Shard, runtime.Store, *message.Publisher) error {
	a.events <- "finalize"
	return nil
}

// beginFinishApp is a testApp that is also a runtime.BeginFinisher.
type beginFinishApp struct{ *testApp }

func (a beginFinishApp) BeginTxn(runtime.Shard, runtime.Store) error {
	a.events <- "begin"
	return nil
}
func (a beginFinishApp) FinishTxn(_ runtime.Shard, _ runtime.Store, err error) error {
	a.events <- "finish"
	a.finishErrs <- err
	return nil
}

const (
	minDur = 10 * time.Second
	maxDur = 60 * time.Second
)

type harness struct {
	t        *testing.T
	clock    *fakeClock
	app      *testApp
	store    *testStore
	reads    *Queue
	producer message.ProducerID
	seq      message.Clock
	offset   pb.Offset
	done     chan error
	stats    chan Stats
	pipeline *Pipeline
}

func newHarness(t *testing.T, beginFinish bool) *harness {
	var h = &harness{
		t:        t,
		clock:    &fakeClock{now: time.Unix(1_000_000, 0)},
		app:      &testApp{events: make(chan string, 100), finishErrs: make(chan error, 100)},
		store:    &testStore{commits: make(chan *client.AsyncOperation, 10), cps: make(chan pc.Checkpoint, 10)},
		reads:    NewQueue(100),
		producer: message.NewProducerID(),
		done:     make(chan error, 1),
		stats:    make(chan Stats, 10),
	}
	var app runtime.Application = h.app
	if beginFinish {
		app = beginFinishApp{h.app}
	}
	h.pipeline = &Pipeline{
		Shard:       testShard{ctx: context.Background()},
		Store:       h.store,
		App:         app,
		Publisher:   message.NewPublisher(nil, nil),
		Sequencer:   sequence.New(nil, nil, 16),
		Replay:      func(pb.Journal, pb.Offset, pb.Offset) message.Iterator { panic("unexpected replay") },
		Pending:     func() client.OpFutures { return nil },
		Clock:       h.clock,
		MinDuration: minDur,
		MaxDuration: maxDur,
		WaitForAck:  true,
		Committed:   func(s Stats) { h.stats <- s },
	}
	return h
}

func (h *harness) run() {
	go func() { h.done <- h.pipeline.Run(context.Background(), pc.Checkpoint{}, h.reads) }()
}

var journal = &pb.JournalSpec{Name: "test/journal"}

// put queues r for the pipeline.
func (h *harness) put(r Read) {
	h.t.Helper()
	if err := h.reads.Put(context.Background(), r); err != nil {
		h.t.Fatal(err)
	}
}

// send reads a message with flags into the pipeline.
func (h *harness) send(key string, flags message.Flags) { h.sendRead(key, flags, 0) }

// sendRead reads a message of 10 bytes with flags into the pipeline, lag
// bytes behind its journal's write head.
func (h *harness) sendRead(key string, flags message.Flags, lag int64) {
	h.seq += 16
	var msg = &testMsg{uuid: message.BuildUUID(h.producer, h.seq, flags), Key: key}
	h.put(Read{Env: message.Envelope{Journal: journal, Begin: h.offset, End: h.offset + 10, Message: msg}, Lag: lag})
	h.offset += 10
}

func (h *harness) expect(events ...string) {
	h.t.Helper()
	for _, want := range events {
		select {
		case got := <-h.app.events:
			if got != want {
				h.t.Fatalf("got event %q, want %q", got, want)
			}
		case err := <-h.done:
			h.done <- err // Events sent before Run returned come first.
			select {
			case got := <-h.app.events:
				if got != want {
					h.t.Fatalf("got event %q, want %q", got, want)
				}
				continue
			default:
			}
			h.t.Fatalf("pipeline exited with %v, waiting for %q", err, want)
		case <-time.After(10 * time.Second):
			h.t.Fatalf("timed out waiting for %q", want)
		}
	}
}

// expectNone checks that no event happens for a while.
func (h *harness) expectNone() {
	h.t.Helper()
	select {
	case got := <-h.app.events:
		h.t.Fatalf("unexpected event %q", got)
	case <-time.After(50 * time.Millisecond):
	}
}

// awaitingPredecessor runs a first transaction, of message a, until it
// commits, and a second, of message b, which consumes while the first
// commits but, past its minimum duration, waits for the first's commit: it
// returns that commit.
func (h *harness) awaitingPredecessor() *client.AsyncOperation {
	h.t.Helper()
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	h.clock.Advance(minDur)
	h.expect("finalize")
	var first, _ = h.commit()

	h.send("b", message.Flag_OUTSIDE_TXN)
	h.expect("consume b")
	h.clock.Advance(minDur)
	h.expectNone() // It waits for its predecessor.
	return first
}

func (h *harness) commit() (*client.AsyncOperation, pc.Checkpoint) {
	h.t.Helper()
	select {
	case cp := <-h.store.cps:
		return <-h.store.commits, cp
	case <-time.After(10 * time.Second):
		h.t.Fatal("timed out waiting for a commit")
		return nil, pc.Checkpoint{}
	}
}

func (h *harness) finish() error {
	h.t.Helper()
	h.reads.Close()
	select {
	case err := <-h.done:
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatal("pipeline did not exit after reads closed")
		return nil
	}
}

func TestTransactionRunsAtLeastMinDuration(t *testing.T) {
	var h = newHarness(t, false)
	h.run()

	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	h.clock.Advance(minDur / 2)
	h.send("b", message.Flag_OUTSIDE_TXN)
	h.expect("consume b")
	h.expectNone() // Reads stalled, but MinDuration has not passed.

	h.clock.Advance(minDur / 2)
	h.expect("finalize")
	var op, cp = h.commit()
	if got := cp.Sources[journal.Name].ReadThrough; got != 20 {
		t.Fatalf("checkpoint reads through %d, want 20", got)
	}
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	var s = <-h.stats
	if s.Messages != 2 || s.Bytes != 20 || s.Consume != minDur {
		t.Fatalf("stats = %+v", s)
	}
}

// A transaction that may finish stays open while a reader behind its
// journal's write head delivers, and finishes once it reads at the head.
func TestTransactionWaitsForABacklog(t *testing.T) {
	var h = newHarness(t, false)
	h.run()

	h.sendRead("a", message.Flag_OUTSIDE_TXN, 1000)
	h.expect("consume a")
	h.clock.Advance(minDur)
	h.expectNone() // MinDuration passed and reads ran dry, but more are coming.

	h.sendRead("b", message.Flag_OUTSIDE_TXN, 0) // At the head.
	h.expect("consume b", "finalize")
	var op, cp = h.commit()
	if got := cp.Sources[journal.Name].ReadThrough; got != 20 {
		t.Fatalf("checkpoint reads through %d, want 20", got)
	}
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
}

// A transaction that may finish, under a steady stream of reads a little
// behind their journal's write head, finishes once it has consumed as many
// bytes as its reader was behind: it does not wait for the stream, which
// never runs dry, until MaxDuration.
func TestTransactionUnderASteadyStreamFinishesOnceItConsumedItsBacklog(t *testing.T) {
	var h = newHarness(t, false)
	h.run()

	// Each read is 50 bytes, five messages, behind the head: its reader
	// always has more, and the transaction's clock stays short of
	// MaxDuration. The next read is sent once the pipeline waits for it.
	const lag = 50
	h.sendRead("m0", message.Flag_OUTSIDE_TXN, lag)
	h.expect("consume m0")
	h.clock.Advance(minDur)
	var consumed = 1
	for ; ; consumed++ {
		if consumed == 100 {
			t.Fatalf("the transaction consumed %d messages of a stream %d bytes behind, and goes on", consumed, lag)
		}
		if h.awaitIdleOrEvent() == "finalize" {
			break
		}
		h.sendRead(fmt.Sprintf("m%d", consumed), message.Flag_OUTSIDE_TXN, lag)
		h.expect(fmt.Sprintf("consume m%d", consumed))
	}
	if consumed != lag/10 {
		t.Fatalf("the transaction finished after %d messages of 10 bytes, %d bytes behind; want %d", consumed, lag, lag/10)
	}
	var op, cp = h.commit()
	if got, want := cp.Sources[journal.Name].ReadThrough, pb.Offset(consumed*10); got != want {
		t.Fatalf("checkpoint reads through %d, want %d", got, want)
	}
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	if s := <-h.stats; s.Consume != minDur || s.Messages != consumed {
		t.Fatalf("stats = %+v; want %d messages consumed in MinDuration", s, consumed)
	}
}

// awaitIdleOrEvent waits until the pipeline either waits for a reader
// behind its head (its timer of backlogIdle is set), and returns "", or
// reports an event, which it returns.
func (h *harness) awaitIdleOrEvent() string {
	h.t.Helper()
	var deadline = time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case got := <-h.app.events:
			return got
		default:
		}
		if h.clock.pending(backlogIdle) {
			return ""
		}
		time.Sleep(time.Millisecond)
	}
	h.t.Fatal("timed out waiting for the pipeline to wait for reads, or to act")
	return ""
}

// A transaction reading through a backlog waits for its reader until it
// has read as many bytes as the largest backlog it saw, though what is left
// of the backlog shrinks below what it has read: a backlog is read in as
// few transactions as it can be.
func TestTransactionReadsAsMuchAsTheLargestBacklogItSaw(t *testing.T) {
	var h = newHarness(t, false)
	h.run()

	h.sendRead("a", message.Flag_OUTSIDE_TXN, 40) // 40 bytes ahead.
	h.expect("consume a")
	h.clock.Advance(minDur)
	h.expectNone()
	h.sendRead("b", message.Flag_OUTSIDE_TXN, 30)
	h.expect("consume b")
	h.expectNone()
	h.sendRead("c", message.Flag_OUTSIDE_TXN, 20) // 20 left, 30 consumed: not yet 40.
	h.expect("consume c")
	h.expectNone()
	h.sendRead("d", message.Flag_OUTSIDE_TXN, 10) // 40 consumed.
	h.expect("consume d", "finalize")
	var op, cp = h.commit()
	if got := cp.Sources[journal.Name].ReadThrough; got != 40 {
		t.Fatalf("checkpoint reads through %d, want 40", got)
	}
	op.Resolve(nil)
	// The rest of the backlog is the next transaction's.
	h.sendRead("e", message.Flag_OUTSIDE_TXN, 0)
	h.expect("consume e")
	h.clock.Advance(minDur)
	h.expect("finalize")
	op, _ = h.commit()
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
}

// A reader behind its journal's write head that delivers nothing for
// backlogIdle no longer keeps the transaction open.
func TestTransactionStopsWaitingForAStalledBacklog(t *testing.T) {
	var h = newHarness(t, false)
	h.run()

	h.sendRead("a", message.Flag_OUTSIDE_TXN, 1000)
	h.expect("consume a")
	h.clock.Advance(minDur)
	h.expectNone()
	// The pipeline's idle timer is set once it ran dry: step time until it
	// fires, far short of MaxDuration.
	for i := 0; ; i++ {
		if i == 100 {
			t.Fatal("the transaction waited past 100 × backlogIdle for a stalled reader")
		}
		h.clock.Advance(backlogIdle)
		select {
		case got := <-h.app.events:
			if got != "finalize" {
				t.Fatalf("got event %q, want finalize", got)
			}
		case <-time.After(20 * time.Millisecond):
			continue
		}
		break
	}
	var op, _ = h.commit()
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	if s := <-h.stats; s.Consume >= maxDur {
		t.Fatalf("the transaction ran %v, to MaxDuration", s.Consume)
	}
}

func TestTransactionClosesAtMaxDurationWhileAwaitingAck(t *testing.T) {
	var h = newHarness(t, false)
	h.run()

	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	// A sequence begins but is not acknowledged: the transaction waits for
	// its ACK past MinDuration, up to MaxDuration.
	h.send("pending", message.Flag_CONTINUE_TXN)
	h.clock.Advance(minDur)
	h.expectNone()
	h.clock.Advance(maxDur - minDur)
	h.expect("finalize")
	var op, cp = h.commit()
	if got := cp.Sources[journal.Name].ReadThrough; got != 20 {
		t.Fatalf("checkpoint reads through %d, want 20", got)
	}
	op.Resolve(nil)

	// The acknowledgement arrives in the next transaction, which consumes
	// the acknowledged message but never hands the ACK to the application.
	h.send("", message.Flag_ACK_TXN)
	h.expect("consume pending")
	h.clock.Advance(minDur)
	h.expect("finalize")
	op, _ = h.commit()
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
}

func TestSuccessorConsumesButWaitsForPredecessorCommit(t *testing.T) {
	var h = newHarness(t, false)
	h.run()

	// The successor consumes while its predecessor commits, but may not
	// finalize before the predecessor has committed.
	var first = h.awaitingPredecessor()
	// At MaxDuration it stalls: it reads no further message.
	h.clock.Advance(maxDur - minDur)
	h.send("c", message.Flag_OUTSIDE_TXN)
	h.expectNone()

	first.Resolve(nil)
	h.expect("finalize")
	var second, _ = h.commit()
	if s := <-h.stats; s.Messages != 1 {
		t.Fatalf("first transaction stats = %+v", s)
	}
	second.Resolve(nil)

	h.expect("consume c") // The third transaction picks up what the stalled one didn't read.
	h.clock.Advance(minDur)
	h.expect("finalize")
	var third, cp = h.commit()
	if got := cp.Sources[journal.Name].ReadThrough; got != 30 {
		t.Fatalf("checkpoint reads through %d, want 30", got)
	}
	third.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	if s := <-h.stats; s.Messages != 1 || s.Stalled != 0 {
		t.Fatalf("second transaction stats = %+v", s)
	}
}

// A transaction that hurries takes no more reads and starts its commit
// beside its predecessor's; its successor, which may not hurry with two
// commits in flight, consumes nothing while the shard hurries, then what
// the hurried one took but did not consume, and waits for both commits,
// which are reported in order. A failure of the first commit fails the
// shard.
func TestHurriedTransactionCommitsBesideItsPredecessor(t *testing.T) {
	for _, fail := range []bool{false, true} {
		var h = newHarness(t, false)
		var hurry = hurrying(h)
		h.run()

		var first = h.awaitingPredecessor() // Not hurrying.
		hurry.Store(true)
		h.send("c", message.Flag_OUTSIDE_TXN) // Asked again as it reads.
		h.expect("finalize")
		var second, cp = h.commit()
		if got := cp.Sources[journal.Name].ReadThrough; got != 20 {
			t.Fatalf("fail=%v: the hurried checkpoint reads through %d, want 20", fail, got)
		}

		// The third may not hurry (two commits are in flight), and
		// consumes nothing while the shard hurries.
		h.send("d", message.Flag_OUTSIDE_TXN)
		h.clock.Advance(minDur)
		h.expectNone()
		select {
		case s := <-h.stats:
			t.Fatalf("fail=%v: reported %+v before any commit resolved", fail, s)
		default:
		}
		if fail {
			first.Resolve(errors.New("append failed"))
			second.Resolve(errors.New("append failed"))
			var err = <-h.done
			if ce := (*CommitError)(nil); !errors.As(err, &ce) || !strings.Contains(err.Error(), "append failed") {
				t.Fatalf("Run returned %v, not the first commit's CommitError", err)
			}
			select {
			case got := <-h.app.events:
				t.Fatalf("the failed shard went on to %q", got)
			default:
			}
			continue
		}
		second.Resolve(nil) // Out of order: the pipeline waits for the first all the same.
		h.expectNone()
		hurry.Store(false) // As the split's commit resolves.
		first.Resolve(nil)
		h.expect("consume c", "consume d")
		h.clock.Advance(minDur)
		h.expect("finalize")
		var third, _ = h.commit()
		for i, want := range []int{1, 1} {
			if s := <-h.stats; s.Messages != want {
				t.Fatalf("transaction %d stats = %+v, want %d messages", i+1, s, want)
			}
		}
		third.Resolve(nil)
		if err := h.finish(); err != nil {
			t.Fatal(err)
		}
		if s := <-h.stats; s.Messages != 2 {
			t.Fatalf("third transaction stats = %+v", s)
		}
	}
}

// A transaction that has begun, with no commit before it in flight, takes
// no more reads once the shard hurries: it finishes with what it consumed,
// and its successor consumes what it had not.
func TestHurriedTransactionTakesNoMoreReads(t *testing.T) {
	var h = newHarness(t, false)
	var hurry = hurrying(h)
	h.run()

	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	hurry.Store(true)
	h.send("b", message.Flag_OUTSIDE_TXN)
	h.expectNone() // Not consumed: the transaction takes no more.
	h.clock.Advance(minDur)
	h.expect("finalize")
	var first, cp = h.commit()
	if got := cp.Sources[journal.Name].ReadThrough; got != 10 {
		t.Fatalf("the hurried checkpoint reads through %d, want 10", got)
	}
	hurry.Store(false) // As its commit resolves.
	first.Resolve(nil)
	h.expect("consume b")
	h.clock.Advance(minDur)
	h.expect("finalize")
	var second, _ = h.commit()
	second.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		var s = <-h.stats
		if s.Messages != 1 {
			t.Fatalf("transaction %d stats = %+v, want 1 message", i+1, s)
		}
		// The first saw its shard hurry, the second did not.
		if hurried := s.Hurried != 0; hurried != (i == 0) {
			t.Fatalf("transaction %d stats = %+v: Hurried %s", i+1, s, s.Hurried)
		}
	}
}

// hurrying has the harness's shard hurry while the returned flag is set.
func hurrying(h *harness) *atomic.Bool {
	var hurry = new(atomic.Bool)
	h.pipeline.Hurry = hurry.Load
	return hurry
}

func TestBeginAndFinishArePaired(t *testing.T) {
	var h = newHarness(t, true)
	h.run()

	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("begin", "consume a")
	h.clock.Advance(minDur)
	h.expect("finalize", "finish")
	if err := <-h.app.finishErrs; err != nil {
		t.Fatalf("FinishTxn told %v, want nil", err)
	}
	var op, _ = h.commit()
	op.Resolve(nil)

	// A failing message: FinishTxn is told, and the error names where the
	// message was read.
	h.app.consumeErr = errors.New("boom")
	h.send("bad", message.Flag_OUTSIDE_TXN)
	h.expect("begin", "consume bad", "finish")
	var told = <-h.app.finishErrs
	var err = <-h.done
	if err == nil || told == nil || err.Error() != told.Error() {
		t.Fatalf("Run returned %v, FinishTxn told %v", err, told)
	}
	if !strings.Contains(err.Error(), "journal test/journal offset 10") || !errors.Is(err, h.app.consumeErr) {
		t.Fatalf("error %q does not name the journal and offset", err)
	}
}

func TestFailedCommitFailsTheShard(t *testing.T) {
	t.Run("at once", func(t *testing.T) {
		var h = newHarness(t, false)
		h.store.failNow = errors.New("disk full")
		h.run()
		h.send("a", message.Flag_OUTSIDE_TXN)
		h.expect("consume a")
		h.clock.Advance(minDur)
		h.expect("finalize")
		var err = <-h.done
		if err == nil || !strings.Contains(err.Error(), "disk full") {
			t.Fatalf("Run returned %v", err)
		}
		var ce *CommitError
		if !errors.As(err, &ce) {
			t.Fatalf("Run returned %v, not a CommitError", err)
		}
	})
	t.Run("asynchronously", func(t *testing.T) {
		var h = newHarness(t, false)
		h.run()
		h.send("a", message.Flag_OUTSIDE_TXN)
		h.expect("consume a")
		h.clock.Advance(minDur)
		h.expect("finalize")
		var op, _ = h.commit()
		h.send("b", message.Flag_OUTSIDE_TXN)
		h.expect("consume b")
		op.Resolve(errors.New("append failed"))
		var err = <-h.done
		if err == nil || !strings.Contains(err.Error(), "committing the previous transaction: append failed") {
			t.Fatalf("Run returned %v", err)
		}
		if ce := (*CommitError)(nil); !errors.As(err, &ce) {
			t.Fatalf("Run returned %v, not a CommitError", err)
		}
		select {
		case got := <-h.app.events:
			t.Fatalf("the failed shard went on to %q", got)
		default:
		}
	})
}

func TestReadErrorFailsTheShard(t *testing.T) {
	var h = newHarness(t, false)
	h.run()
	var readErr = fmt.Errorf("reading test/journal at offset 42: %w", errors.New("garbage"))
	h.put(Read{Err: readErr})
	if err := <-h.done; !errors.Is(err, readErr) {
		t.Fatalf("Run returned %v", err)
	}
}

func TestClosedReadsCommitTheOpenTransaction(t *testing.T) {
	var h = newHarness(t, false)
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	h.reads.Close()
	h.clock.Advance(minDur)
	h.expect("finalize")
	var op, _ = h.commit()
	select {
	case err := <-h.done:
		t.Fatalf("Run returned %v before its last commit resolved", err)
	case <-time.After(50 * time.Millisecond):
	}
	op.Resolve(nil)
	if err := <-h.done; err != nil {
		t.Fatal(err)
	}
	if s := <-h.stats; s.Messages != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

func TestDuplicatesAreNotConsumed(t *testing.T) {
	var h = newHarness(t, false)
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	// Re-deliver the same message at a later offset, as a producer retry would.
	h.seq -= 16
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.clock.Advance(minDur)
	h.expect("finalize")
	var op, cp = h.commit()
	if got := cp.Sources[journal.Name].ReadThrough; got != 20 {
		t.Fatalf("checkpoint reads through %d, want 20 (past the duplicate)", got)
	}
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
}

// sendUndecodable reads content of n bytes which could not be decoded.
func (h *harness) sendUndecodable(n pb.Offset, cause error) {
	h.put(Read{Env: message.Envelope{Journal: journal, Begin: h.offset, End: h.offset + n}, Skip: cause})
	h.offset += n
}

func TestUndecodableReadsAreSkippedWithinATransaction(t *testing.T) {
	var h = newHarness(t, true)
	var skipped = make(chan message.Envelope, 10)
	h.pipeline.Skip = func(env message.Envelope, cause error, pub *message.Publisher) error {
		if pub != h.pipeline.Publisher || cause == nil {
			t.Errorf("Skip called with publisher %p, cause %v", pub, cause)
		}
		h.app.events <- "skip"
		skipped <- env
		return nil
	}
	h.run()

	// A skipped read begins a transaction of its own.
	h.sendUndecodable(7, errors.New("bad json"))
	h.expect("begin", "skip")
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	// Undecodable content last in the journal: the checkpoint reads past
	// it, though no message follows.
	h.sendUndecodable(5, errors.New("bad json"))
	h.expect("skip")
	h.clock.Advance(minDur)
	h.expect("finalize", "finish")
	<-h.app.finishErrs
	var op, cp = h.commit()
	if got := cp.Sources[journal.Name].ReadThrough; got != 22 {
		t.Fatalf("checkpoint reads through %d, want 22 (past the undecodable content)", got)
	}
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	if s := <-h.stats; s.Messages != 1 || s.Skipped != 2 {
		t.Fatalf("stats = %+v", s)
	}
	if env := <-skipped; env.Begin != 0 || env.End != 7 || env.Message != nil {
		t.Fatalf("skipped %+v", env)
	}
}

func TestUndecodableReadFailsTheShardWithoutSkip(t *testing.T) {
	var h = newHarness(t, false)
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	var cause = errors.New("bad json")
	h.sendUndecodable(5, cause)
	if err := <-h.done; !errors.Is(err, cause) || !strings.Contains(err.Error(), "journal test/journal offset 10") {
		t.Fatalf("Run returned %v", err)
	}
}

func TestFailedSkipFailsTheShard(t *testing.T) {
	var h = newHarness(t, false)
	var cause = errors.New("dead-letter journal is gone")
	h.pipeline.Skip = func(message.Envelope, error, *message.Publisher) error { return cause }
	h.run()
	h.sendUndecodable(5, errors.New("bad json"))
	if err := <-h.done; !errors.Is(err, cause) || !strings.Contains(err.Error(), "skipping journal test/journal offset 0") {
		t.Fatalf("Run returned %v", err)
	}
}

// Reads that begin no transaction (a duplicate, a lone acknowledgement)
// still advance the shard's read progress: at once when no transaction is
// committing, and once the committing one is done otherwise. A reader of
// Stat waiting for the write head would otherwise wait forever.
func TestIdleReadsAdvanceProgress(t *testing.T) {
	var h = newHarness(t, false)
	var progress = make(chan pb.Offset, 10)
	h.pipeline.Progress = func(j pb.Journal, o pb.Offset) {
		if j != journal.Name {
			t.Errorf("progress of %s", j)
		}
		progress <- o
	}
	var expectProgress = func(want pb.Offset) {
		t.Helper()
		select {
		case got := <-progress:
			if got != want {
				t.Fatalf("progress through %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no progress through %d", want)
		}
	}
	var expectNoProgress = func() {
		t.Helper()
		select {
		case got := <-progress:
			t.Fatalf("unexpected progress through %d", got)
		case <-time.After(50 * time.Millisecond):
		}
	}
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN) // [0, 10)
	h.expect("consume a")
	h.clock.Advance(minDur)
	h.expect("finalize")
	var op, _ = h.commit()

	// A duplicate while the transaction commits: reported once it is done.
	h.seq -= 16
	h.send("a", message.Flag_OUTSIDE_TXN) // [10, 20)
	expectNoProgress()
	op.Resolve(nil)
	if st := <-h.stats; st.Checkpoint.Sources[journal.Name].ReadThrough != 10 {
		t.Fatalf("committed %v", st.Checkpoint)
	}
	expectProgress(20)

	// A duplicate with nothing committing: reported at once.
	h.seq -= 16
	h.send("a", message.Flag_OUTSIDE_TXN) // [20, 30)
	expectProgress(30)

	// A transaction of two messages, then an acknowledgement of them read
	// alone: the acknowledgement begins no transaction, and is reported.
	h.send("b", message.Flag_CONTINUE_TXN) // [30, 40)
	h.send("c", message.Flag_ACK_TXN)      // [40, 50): acknowledges b and itself.
	h.expect("consume b")
	h.clock.Advance(minDur)
	h.expect("finalize")
	op, _ = h.commit()
	op.Resolve(nil)
	<-h.stats
	h.seq -= 16
	h.send("c", message.Flag_ACK_TXN) // [50, 60): a duplicate acknowledgement, as a recovering producer re-sends.
	expectProgress(60)
	expectNoProgress()
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
}

func TestNudgeBeginsATransactionWithoutMessages(t *testing.T) {
	var h = newHarness(t, true)
	h.run()
	if err := h.reads.Put(context.Background(), Read{Nudge: true}); err != nil {
		t.Fatal(err)
	}
	h.expect("begin")
	// The application's BeginTxn is told before the transaction's timer is
	// set: advanced before it, the clock would leave it unfired.
	h.awaitTimer(minDur)
	h.clock.Advance(minDur)
	h.expect("finalize", "finish")
	var op, _ = h.commit()
	op.Resolve(nil)
	if s := <-h.stats; s.Messages != 0 {
		t.Fatalf("stats = %+v, want a transaction of no message", s)
	}
}

// prefetchApp is a testApp that is also a runtime.Prefetcher.
type prefetchApp struct{ *testApp }

func (a prefetchApp) Prefetch(_ runtime.Shard, _ runtime.Store, msgs []message.Message) error {
	var keys []string
	for _, m := range msgs {
		keys = append(keys, m.(*testMsg).Key)
	}
	a.events <- "prefetch " + strings.Join(keys, " ")
	return nil
}

// The messages of the reads taken from the queue, but acknowledgements, are
// handed to a Prefetcher before they are sequenced and consumed.
func TestPipelinePrefetchesTheReadsTaken(t *testing.T) {
	var h = newHarness(t, false)
	h.pipeline.App = prefetchApp{h.app}
	h.send("a", message.Flag_CONTINUE_TXN)
	h.send("b", message.Flag_CONTINUE_TXN)
	h.send("ack", message.Flag_ACK_TXN)
	h.run()
	h.expect("prefetch a b", "consume a", "consume b")
	h.clock.Advance(minDur)
	h.expect("finalize")
	var op, _ = h.commit()
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
}

// A transaction consuming a long run of ready messages polls its timer every
// pollEvery of them: a tick fired is seen within pollEvery messages.
func TestPollSeesATickWithinPollEvery(t *testing.T) {
	var p Pipeline
	var timer = make(chan time.Time, 1)
	var cur = &txn{timer: timer}
	if _, ok := p.poll(cur); ok {
		t.Fatal("polled a tick of a timer that didn't fire")
	}
	var fired = time.Unix(1, 0)
	timer <- fired
	for i := 1; ; i++ {
		if i > pollEvery {
			t.Fatalf("no tick after %d polls", i)
		} else if tick, ok := p.poll(cur); ok {
			if !tick.Equal(fired) {
				t.Fatalf("polled tick %v, want %v", tick, fired)
			}
			break
		}
	}
	if len(timer) != 0 {
		t.Fatal("the tick is still in its channel")
	}
}

// A transaction waiting for its predecessor's commit, past its minimum
// duration, with no read to wake it (the shard's readers are held as it
// hurries), hurries as soon as the shard does: it finalizes, without a
// read, and its commit is in flight beside its predecessor's.
func TestHurryWakesATransactionWaitingForItsPredecessor(t *testing.T) {
	var h = newHarness(t, false)
	var hurry = hurrying(h)
	var hurried = make(chan struct{})
	h.pipeline.Hurried = func() <-chan struct{} { return hurried }
	h.run()

	var first = h.awaitingPredecessor()
	hurry.Store(true)
	close(hurried) // No read follows.
	h.expect("finalize")
	var second, cp = h.commit()
	if got := cp.Sources[journal.Name].ReadThrough; got != 20 {
		t.Fatalf("the hurried checkpoint reads through %d, want 20", got)
	}
	hurry.Store(false)
	first.Resolve(nil)
	second.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if s := <-h.stats; (s.Hurried != 0) != (i == 1) {
			t.Fatalf("transaction %d stats = %+v: Hurried %s", i+1, s, s.Hurried)
		}
	}
}

// Finalized is told of a transaction as it has started its commit, before
// the commit resolves: a shard which hurries until then (as a splitting
// one does) consumes the next messages while that commit is in flight.
func TestFinalizedIsToldAsTheCommitStarts(t *testing.T) {
	var h = newHarness(t, false)
	var hurry = hurrying(h)
	var finalized = make(chan Stats, 10)
	h.pipeline.Finalized = func(s Stats) {
		hurry.Store(false)
		finalized <- s
	}
	h.run()

	hurry.Store(true)
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	h.clock.Advance(minDur)
	h.expect("finalize") // Hurried: it took no more reads.
	var first, cp = h.commit()
	var told = func() Stats {
		t.Helper()
		select {
		case s := <-finalized:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("Finalized was not told of a transaction that started its commit")
			return Stats{}
		}
	}
	var s = told()
	if s.Began.IsZero() || s.Hurried == 0 || s.Checkpoint.Sources[journal.Name].ReadThrough != cp.Sources[journal.Name].ReadThrough {
		t.Fatalf("Finalized told %+v, checkpoint %v", s, cp)
	}
	select {
	case <-first.Done():
		t.Fatal("the commit resolved before the test resolved it")
	default:
	}
	// With the hurry over, the next transaction consumes while its
	// predecessor's commit is in flight, and waits for it to finish.
	h.send("b", message.Flag_OUTSIDE_TXN)
	h.expect("consume b")
	h.clock.Advance(minDur)
	h.expectNone()
	first.Resolve(nil)
	h.expect("finalize")
	var second, _ = h.commit()
	if s = told(); s.Hurried != 0 || s.Consume != minDur {
		t.Fatalf("Finalized told %+v of the second transaction", s)
	}
	second.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
}

// sizedStore is a testStore that is a runtime.TxnSizer: sizedApp writes
// 100 bytes to it with each message consumed.
type sizedStore struct {
	*testStore
	written atomic.Int64
}

func (s *sizedStore) TxnSize() (bytes, writes int) {
	var n = int(s.written.Load())
	return n, n / 100
}
func (s *sizedStore) StartCommit(sh runtime.Shard, cp pc.Checkpoint, waitFor client.OpFutures) client.OpFuture {
	s.written.Store(0)
	return s.testStore.StartCommit(sh, cp, waitFor)
}

type sizedApp struct{ *testApp }

func (a sizedApp) ConsumeMessage(sh runtime.Shard, st runtime.Store, env message.Envelope, pub *message.Publisher) error {
	st.(*sizedStore).written.Add(100)
	return a.testApp.ConsumeMessage(sh, st, env, pub)
}

// A transaction reading a backlog, which would stay open until
// MaxDuration, takes no more reads once its writes reach MaxTxn, in bytes
// or in keys (as its Limits say): it finishes at MinDuration, and its
// successor consumes the rest. Without a bound, it consumes the whole
// backlog.
func TestTransactionEndsOnceItReachedMaxTxn(t *testing.T) {
	// Each message writes 100 bytes, one key: each bound but the last is
	// reached by 10 messages.
	for _, tc := range []struct {
		max   runtime.TxnBound
		bound int // In bytes.
	}{{runtime.TxnBound{Bytes: 1000}, 1000}, {runtime.TxnBound{Writes: 10}, 1000}, {runtime.TxnBound{Bytes: 1000, Writes: 1000}, 1000}, {runtime.TxnBound{}, 0}} {
		var bound = tc.bound
		var h = newHarness(t, false)
		var store = &sizedStore{testStore: h.store}
		h.pipeline.Store, h.pipeline.App = store, sizedApp{h.app}
		h.pipeline.Limits = func() (Limits, error) {
			return Limits{MinDuration: minDur, MaxDuration: maxDur, WaitForAck: true, MaxTxn: tc.max}, nil
		}
		h.run()

		const n = 60
		for i := range n {
			h.sendRead(fmt.Sprint(i), message.Flag_OUTSIDE_TXN, 1<<20)
		}
		var consumed int
		for done := false; !done; {
			select {
			case ev := <-h.app.events:
				if want := fmt.Sprintf("consume %d", consumed); ev != want {
					t.Fatalf("bound %d: got event %q, want %q", bound, ev, want)
				}
				consumed++
			case <-time.After(100 * time.Millisecond):
				done = true
			}
		}
		if bound == 0 {
			if consumed != n {
				t.Fatalf("without a bound, the transaction consumed %d of the %d messages of its backlog", consumed, n)
			}
			h.clock.Advance(minDur)
			h.expectNone() // It waits for the backlog, up to MaxDuration.
			h.clock.Advance(maxDur - minDur)
			h.expect("finalize")
			var op, _ = h.commit()
			op.Resolve(nil)
			if err := h.finish(); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// It wrote the bound (10 messages) and polls it every pollEvery
		// reads at most.
		if consumed < bound/100 || consumed > bound/100+pollEvery {
			t.Fatalf("the transaction consumed %d messages of 100 bytes, bound at %d bytes", consumed, bound)
		}
		h.expectNone()
		h.clock.Advance(minDur) // Far short of MaxDuration.
		h.expect("finalize")
		var op, cp = h.commit()
		if got, want := cp.Sources[journal.Name].ReadThrough, pb.Offset(consumed*10); got != want {
			t.Fatalf("checkpoint reads through %d, want %d", got, want)
		}
		op.Resolve(nil)
		var s = <-h.stats
		if s.Messages != consumed {
			t.Fatalf("stats = %+v, want %d messages", s, consumed)
		}
		// The successors consume the rest, each as bound.
		for consumed < n {
			select {
			case ev := <-h.app.events:
				if want := fmt.Sprintf("consume %d", consumed); ev != want {
					t.Fatalf("got event %q, want %q", ev, want)
				}
				consumed++
				if wrote, _ := store.TxnSize(); wrote > bound+pollEvery*100 {
					t.Fatalf("a transaction wrote %d bytes, bound at %d", wrote, bound)
				}
			case <-time.After(100 * time.Millisecond):
				h.clock.Advance(maxDur) // The last may not be full.
				h.expect("finalize")
				var op, _ = h.commit()
				op.Resolve(nil)
			}
		}
		h.clock.Advance(maxDur)
		h.expect("finalize")
		op, _ = h.commit()
		op.Resolve(nil)
		if err := h.finish(); err != nil {
			t.Fatal(err)
		}
	}
}

// An error of Limits, as of a shard's spec with a bad label, fails the
// shard as its transaction begins.
func TestLimitsErrorFailsTheShard(t *testing.T) {
	var h = newHarness(t, false)
	var bad = errors.New("shard test/shard: label gazconsumer.dev/max-txn-bytes is \"x\"")
	h.pipeline.Limits = func() (Limits, error) { return Limits{}, bad }
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN)
	select {
	case err := <-h.done:
		if !errors.Is(err, bad) {
			t.Fatalf("pipeline exited with %v, want %v", err, bad)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pipeline did not fail")
	}
}
