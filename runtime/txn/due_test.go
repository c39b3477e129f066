package txn

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
)

// timedApp is a testApp which is a runtime.Timekeeper of a list of times
// things fall due: each fires once.
type timedApp struct {
	*testApp
	due []time.Time
}

func (a *timedApp) Due(runtime.Shard, runtime.Store) (time.Time, bool, error) {
	if len(a.due) == 0 {
		return time.Time{}, false, nil
	}
	return slices.MinFunc(a.due, func(x, y time.Time) int { return x.Compare(y) }), true, nil
}

func (a *timedApp) Fire(_ runtime.Shard, _ runtime.Store, now time.Time, _ *message.Publisher, _ runtime.TxnBound) (int, error) {
	var n int
	a.due = slices.DeleteFunc(a.due, func(t time.Time) bool {
		if t.After(now) {
			return false
		}
		n++
		return true
	})
	if n != 0 {
		a.events <- fmt.Sprintf("fire %d", n)
	}
	return n, nil
}

func (a *timedApp) SetTime(runtime.Shard, runtime.Store, time.Time, *message.Publisher) error {
	a.events <- "set time"
	return nil
}

func newTimedHarness(t *testing.T, due ...time.Duration) (*harness, *timedApp) {
	var h = newHarness(t, false)
	var app = &timedApp{testApp: h.app}
	for _, d := range due {
		app.due = append(app.due, h.clock.now.Add(d))
	}
	h.pipeline.App = app
	return h, app
}

// What falls due while no transaction runs begins one, which fires it and
// commits, though it consumed no message.
func TestDueBeginsATransaction(t *testing.T) {
	var h, _ = newTimedHarness(t, 5*time.Second)
	h.run()
	h.expectNone()
	h.clock.Advance(4 * time.Second)
	h.expectNone()
	h.clock.Advance(time.Second)
	h.expect("fire 1")
	h.clock.Advance(minDur)
	h.expect("finalize")
	var op, _ = h.commit()
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	if s := <-h.stats; s.Messages != 0 || s.Fired != 1 {
		t.Errorf("stats %+v", s)
	}
}

// A transaction fires what is due as it begins, and what fell due while it
// ran before it finalizes.
func TestDueFiresWithinATransaction(t *testing.T) {
	var h, _ = newTimedHarness(t, time.Second, 3*time.Second)
	h.run()
	h.expectNone()
	h.clock.Advance(time.Second)
	h.expect("fire 1") // A transaction begins for it.
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	h.clock.Advance(minDur)
	h.expect("fire 1", "finalize")
	var op, _ = h.commit()
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	if s := <-h.stats; s.Messages != 1 || s.Fired != 2 {
		t.Errorf("stats %+v", s)
	}
}

// A transaction that hurries (its shard splits) leaves what fell due while
// it ran to its successor, which fires it as it begins: the hurried commit
// starts without waiting for the firing.
func TestHurriedTransactionLeavesWhatFellDueToItsSuccessor(t *testing.T) {
	var h, app = newTimedHarness(t, time.Second)
	var hurry = hurrying(h)
	h.pipeline.Finalized = func(Stats) { hurry.Store(false) }
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	hurry.Store(true)
	h.clock.Advance(minDur)
	h.expect("finalize") // Not "fire 1": it hurried.
	var op, _ = h.commit()
	op.Resolve(nil)
	if s := <-h.stats; s.Messages != 1 || s.Fired != 0 || s.Fire != 0 {
		t.Errorf("the hurried transaction's stats %+v", s)
	}
	expectSuccessorFires(h, app)
}

// A transaction that begins as its shard hurries fires nothing, though
// something is due: it sets its time, and leaves what is due to its
// successor, which fires it as it begins.
func TestTransactionBegunHurriedLeavesWhatIsDueToItsSuccessor(t *testing.T) {
	var h, app = newTimedHarness(t, time.Second)
	var hurry = hurrying(h)
	h.pipeline.Finalized = func(Stats) { hurry.Store(false) }
	hurry.Store(true)
	h.run()
	h.awaitTimer(time.Second)
	h.clock.Advance(time.Second)
	h.expect("set time") // Not "fire 1": it began as the shard hurried.
	h.clock.Advance(minDur)
	h.expect("finalize")
	var op, _ = h.commit()
	op.Resolve(nil)
	if s := <-h.stats; s.Fired != 0 {
		t.Errorf("the hurried transaction's stats %+v", s)
	}
	expectSuccessorFires(h, app)
}

// A transaction that reached MaxTxn fires nothing more as it finalizes:
// what fell due while it ran is its successor's, which fires it as it
// begins.
func TestFullTransactionLeavesWhatFellDueToItsSuccessor(t *testing.T) {
	var h, app = newTimedHarness(t, time.Second)
	var store = &sizedStore{testStore: h.store}
	h.pipeline.Store, h.pipeline.MaxTxn = store, runtime.TxnBound{Bytes: 1000}
	h.run()
	h.send("a", message.Flag_OUTSIDE_TXN)
	h.expect("consume a")
	store.written.Store(1000) // As if "a" wrote the transaction's bound.
	h.clock.Advance(minDur)
	h.expect("finalize") // Not "fire 1": it is full.
	var op, _ = h.commit()
	op.Resolve(nil)
	if s := <-h.stats; s.Messages != 1 || s.Fired != 0 {
		t.Errorf("the full transaction's stats %+v", s)
	}
	expectSuccessorFires(h, app)
}

// expectSuccessorFires expects, once a transaction left what fell due, that
// its successor begins for it (as it falls due, already, by the time the
// pipeline asks the clock), fires it and commits, and that nothing is left
// due.
func expectSuccessorFires(h *harness, app *timedApp) {
	h.t.Helper()
	var at, _, _ = app.Due(nil, nil)
	h.awaitTimer(at.Sub(h.clock.Now()))
	h.clock.Advance(0)
	h.expect("fire 1")
	h.clock.Advance(minDur)
	h.expect("finalize")
	var op, _ = h.commit()
	op.Resolve(nil)
	if err := h.finish(); err != nil {
		h.t.Fatal(err)
	}
	if s := <-h.stats; s.Messages != 0 || s.Fired != 1 {
		h.t.Errorf("its successor's stats %+v", s)
	}
	if len(app.due) != 0 {
		h.t.Errorf("still due: %v", app.due)
	}
}

// awaitTimer waits until the pipeline has set a timer d from now.
func (h *harness) awaitTimer(d time.Duration) {
	h.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !h.clock.pending(d); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			h.t.Fatalf("the pipeline set no timer %s from now", d)
		}
	}
}

// Reads that close leave what is due now to a last transaction.
func TestDueFiresAfterReadsClose(t *testing.T) {
	var h, app = newTimedHarness(t)
	h.pipeline.MinDuration, h.pipeline.Clock = 0, instantClock{h.clock.now}
	h.reads.Close()
	app.due = []time.Time{h.clock.now}
	go func() {
		var op, _ = h.commit()
		op.Resolve(nil)
	}()
	if err := h.pipeline.Run(t.Context(), pc.Checkpoint{}, h.reads); err != nil {
		t.Fatal(err)
	}
	h.expect("fire 1", "finalize")
	if len(app.due) != 0 {
		t.Errorf("still due: %v", app.due)
	}
}

// instantClock is a Clock whose timers of no duration fire at once, and of
// any other never.
type instantClock struct{ now time.Time }

func (c instantClock) Now() time.Time { return c.now }
func (c instantClock) Timer(d time.Duration) (<-chan time.Time, func()) {
	var ch = make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
	}
	return ch, func() {}
}
