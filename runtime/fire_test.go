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
// once, and nothing due later.
func TestFireFiresEverythingDueOnce(t *testing.T) {
	for _, n := range []int{1, 255, 256, 257, 3000} {
		var f = newLinkFixture(t)
		var s = f.parent
		var tk, bf = s.app.(runtime.Timekeeper), s.app.(runtime.BeginFinisher)
		var now = time.Unix(1_700_000_000, 0)
		// txn runs a transaction at now, of orders of customers.
		var txn = func(now time.Time, customers ...string) int {
			if err := bf.BeginTxn(s.sh, s.store); err != nil {
				t.Fatal(err)
			}
			var fired, err = tk.Fire(s.sh, s.store, now, nil)
			if err != nil {
				t.Fatal(err)
			}
			f.consume(s, customers...)
			if err = s.app.FinalizeTxn(s.sh, s.store, nil); err != nil {
				t.Fatal(err)
			}
			var cp = pc.Checkpoint{Sources: map[pb.Journal]pc.Checkpoint_Source{s.own: {ReadThrough: f.offset}}}
			if err = s.store.StartCommit(s.sh, cp, nil).Err(); err != nil {
				t.Fatal(err)
			} else if err = bf.FinishTxn(s.sh, s.store, nil); err != nil {
				t.Fatal(err)
			}
			return fired
		}
		var customers []string
		for i := range n {
			customers = append(customers, fmt.Sprintf("c-%05d", i))
		}
		txn(now, customers...) // A timer and an expiry of each falls due later.
		var first, last = min(f.log.ttl, f.log.delay), max(f.log.ttl, f.log.delay)
		if got := txn(now.Add(first - time.Nanosecond)); got != 0 {
			t.Fatalf("n=%d: fired %d before anything fell due", n, got)
		}
		var want = n
		if first == last {
			want = 2 * n
		}
		if got := txn(now.Add(first)); got != want {
			t.Fatalf("n=%d: fired %d as the first fell due, want %d", n, got, want)
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
	}
}
