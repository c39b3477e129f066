package runtime_test

import (
	"fmt"
	"testing"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/runtime"
)

// Fire fires, in one call, everything of the store due by its time, however
// much (it reads the index of what falls due in batches, which grow), each
// once, and nothing due later. Bound (in bytes or keys), it fires at least
// one, stops once the transaction reached the bound, and leaves the rest
// due, for the next call: every firing still happens once.
func TestFireFiresEverythingDueOnce(t *testing.T) {
	for _, tc := range []struct {
		n     int
		bound runtime.TxnBound
	}{{1, runtime.TxnBound{}}, {255, runtime.TxnBound{}}, {256, runtime.TxnBound{}}, {257, runtime.TxnBound{}}, {3000, runtime.TxnBound{}},
		{1, runtime.TxnBound{Bytes: 1}}, {300, runtime.TxnBound{Bytes: 1}}, {3000, runtime.TxnBound{Bytes: 20 << 10}}, {3000, runtime.TxnBound{Writes: 500}}} {
		var n = tc.n
		var f = newLinkFixture(t)
		var s = f.parent
		var tk, bf = s.app.(runtime.Timekeeper), s.app.(runtime.BeginFinisher)
		var sized = s.store.(runtime.TxnSizer)
		var now = time.Unix(1_700_000_000, 0)
		var perFiring int // The most bytes one firing wrote.
		// step runs a transaction at now, of orders of customers.
		var step = func(now time.Time, customers ...string) int {
			if err := bf.BeginTxn(s.sh, s.store); err != nil {
				t.Fatal(err)
			}
			var fired, err = tk.Fire(s.sh, s.store, now, nil, tc.bound)
			if err != nil {
				t.Fatal(err)
			}
			var wrote, keys = sized.TxnSize()
			if fired == 1 {
				perFiring = max(perFiring, wrote)
			}
			if fired > 1 && (tc.bound.Bytes != 0 && wrote >= tc.bound.Bytes+maxPerFiring || tc.bound.Writes != 0 && keys >= tc.bound.Writes+maxPerFiringKeys) {
				t.Fatalf("n=%d: %d fired, writing %d bytes of %d keys, past the bound %+v by more than one firing",
					n, fired, wrote, keys, tc.bound)
			}
			f.finishTxn(customers...)
			return fired
		}
		// txn runs transactions at now, as a pipeline does: while something
		// is due by now, another begins at once. It returns how many fired.
		var txn = func(now time.Time, customers ...string) int {
			var fired = step(now, customers...)
			for {
				var at, found, err = tk.Due(s.sh, s.store)
				if err != nil {
					t.Fatal(err)
				} else if !found || at.After(now) {
					return fired
				} else if tc.bound == (runtime.TxnBound{}) {
					t.Fatalf("n=%d: %v is still due by %v, once fired without a bound", n, at, now)
				}
				var more = step(now)
				if more == 0 {
					t.Fatalf("n=%d: %v is due by %v, but firing fired nothing", n, at, now)
				}
				fired += more
			}
		}
		var customers []string
		for i := range n {
			customers = append(customers, fmt.Sprintf("c-%05d", i))
		}
		// A timer and an expiry of each falls due later: the orders come in
		// spread transactions a millisecond apart, so that what they set
		// falls due at as many times (a bound stops firing between them).
		const spread = 10
		for i := range spread {
			txn(now.Add(time.Duration(i)*time.Millisecond), customers[i*n/spread:(i+1)*n/spread]...)
		}
		var first, last = min(f.log.ttl, f.log.delay), max(f.log.ttl, f.log.delay)
		now = now.Add((spread - 1) * time.Millisecond) // Of the last orders: the times below are whole seconds after it.
		if got := txn(now.Add(first - spread*time.Millisecond)); got != 0 {
			t.Fatalf("n=%d: fired %d before anything fell due", n, got)
		}
		var want = n
		if first == last {
			want = 2 * n
		}
		if got := txn(now.Add(first)); got != want {
			t.Fatalf("n=%d, bound %+v: fired %d as the first fell due, want %d", n, tc.bound, got, want)
		}
		if got := txn(now.Add(last)); got != 2*n-want {
			t.Fatalf("n=%d: fired %d as the last fell due, want %d", n, got, 2*n-want)
		}
		for kind, fired := range f.log.fired {
			if len(fired) != n {
				t.Errorf("n=%d: %d of kind %d fired, want %d", n, len(fired), kind, n)
			}
			for id, by := range fired {
				if len(by) != 1 {
					t.Errorf("n=%d: %d of kind %d fired by %v", n, id, kind, by)
				}
			}
		}
		if got := txn(now.Add(time.Hour)); got != 0 {
			t.Fatalf("n=%d: fired %d once everything had", n, got)
		}
		if perFiring >= maxPerFiring {
			t.Fatalf("a firing wrote %d bytes: the test's bound of what one writes, %d, is too low", perFiring, maxPerFiring)
		}
	}
}

// maxPerFiring and maxPerFiringKeys bound the bytes and the keys one firing
// of the link fixture's consumer writes.
const (
	maxPerFiring     = 1 << 10
	maxPerFiringKeys = 8
)

// SetTime sets the time of the store's transaction, which what its
// messages set due is reckoned from, and fires nothing, though something is
// due by it: a later Fire does.
func TestSetTimeFiresNothing(t *testing.T) {
	var f = newLinkFixture(t)
	var s = f.parent
	var tk, bf = s.app.(runtime.Timekeeper), s.app.(runtime.BeginFinisher)
	// txn runs a transaction at now, of the orders of customers, firing
	// what is due if fire is set; it returns how many fired.
	var txn = func(now time.Time, fire bool, customers ...string) int {
		if err := bf.BeginTxn(s.sh, s.store); err != nil {
			t.Fatal(err)
		}
		var fired int
		var err error
		if fire {
			fired, err = tk.Fire(s.sh, s.store, now, nil, runtime.TxnBound{})
		} else {
			err = tk.SetTime(s.sh, s.store, now, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		f.finishTxn(customers...)
		return fired
	}
	var now = time.Unix(1_700_000_000, 0)
	var first, last = min(f.log.ttl, f.log.delay), max(f.log.ttl, f.log.delay)
	txn(now, true, "c-1")
	if got := txn(now.Add(last), false, "c-2"); got != 0 || len(f.log.fired[0])+len(f.log.fired[1]) != 0 {
		t.Fatalf("SetTime fired %d: %v", got, f.log.fired)
	}
	if at, found, err := tk.Due(s.sh, s.store); err != nil || !found || at.After(now.Add(last)) {
		t.Fatalf("due at %v (found %v, %v), want by %v", at, found, err, now.Add(last))
	}
	// c-2's timer and expiry are reckoned from the time SetTime set.
	if got := txn(now.Add(last+first).Add(-time.Millisecond), true); got != 2 {
		t.Fatalf("fired %d of c-1's 2 and none of c-2's", got)
	}
	if got := txn(now.Add(2*last), true); got != 2 {
		t.Fatalf("fired %d of c-2's 2 as they fell due", got)
	}
}

// finishTxn consumes, in the parent's transaction begun, orders of
// customers, and finalizes, commits and finishes the transaction.
func (f *linkFixture) finishTxn(customers ...string) {
	f.t.Helper()
	var s = f.parent
	f.consume(s, customers...)
	if err := s.app.FinalizeTxn(s.sh, s.store, nil); err != nil {
		f.t.Fatal(err)
	}
	var cp = pc.Checkpoint{Sources: map[pb.Journal]pc.Checkpoint_Source{s.own: {ReadThrough: f.offset}}}
	if err := s.store.StartCommit(s.sh, cp, nil).Err(); err != nil {
		f.t.Fatal(err)
	} else if err = s.app.(runtime.BeginFinisher).FinishTxn(s.sh, s.store, nil); err != nil {
		f.t.Fatal(err)
	}
}
