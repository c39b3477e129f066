package ledger_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/example/gen/bank/v1/ledgertest"
	"github.com/gazconsumer/gazconsumer/example/internal/ledger"
	"github.com/gazconsumer/gazconsumer/runtime/consumertest"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func at(minute int) *timestamppb.Timestamp {
	return timestamppb.New(time.Date(2026, 1, 1, 0, minute, 0, 0, time.UTC))
}

func order(id, customer, account string, cents int64, minute int) *bankv1.Order {
	return &bankv1.Order{OrderId: id, CustomerId: customer, AccountId: account, AmountCents: cents, PlacedAt: at(minute)}
}

func payment(id, customer, account string, cents int64, minute int) *bankv1.Payment {
	return &bankv1.Payment{PaymentId: id, CustomerId: customer, AccountId: account, AmountCents: cents, ReceivedAt: at(minute)}
}

// Orders charge and payments credit their accounts, in one transaction with
// their customers' activity, and each change of a balance is published with
// the next version of the balance.
func TestOrdersAndPayments(t *testing.T) {
	h := ledgertest.New(t, ledger.NewLedgerHandler())
	h.Payment(payment("p1", "ann", "checking", 1000, 1))
	h.Order(order("o1", "ann", "checking", 300, 2))
	h.Payment(payment("p2", "ann", "savings", 50, 3))
	h.Order(order("o2", "bob", "checking", 20, 4))
	if st := h.Commit(); st.Messages != 4 {
		t.Fatalf("the transaction consumed %d messages, want 4", st.Messages)
	}

	h.Balance.Expect(
		&bankv1.Balance{CustomerId: "ann", AccountId: "checking", BalanceCents: 700, Version: 2},
		&bankv1.Balance{CustomerId: "ann", AccountId: "savings", BalanceCents: 50, Version: 1},
		&bankv1.Balance{CustomerId: "bob", AccountId: "checking", BalanceCents: -20, Version: 1},
	)
	h.CustomerActivity.Expect(
		&bankv1.CustomerActivity{CustomerId: "ann", Orders: 1, OrderedCents: 300, Payments: 2, PaidCents: 1050, LastAt: at(3)},
		&bankv1.CustomerActivity{CustomerId: "bob", Orders: 1, OrderedCents: 20, LastAt: at(4)},
	)
	h.Published.BalanceChanged.Expect(
		&bankv1.BalanceChanged{CustomerId: "ann", AccountId: "checking", DeltaCents: 1000, BalanceCents: 1000, Version: 1, CauseId: "p1", At: at(1)},
		&bankv1.BalanceChanged{CustomerId: "ann", AccountId: "checking", DeltaCents: -300, BalanceCents: 700, Version: 2, CauseId: "o1", At: at(2)},
		&bankv1.BalanceChanged{CustomerId: "ann", AccountId: "savings", DeltaCents: 50, BalanceCents: 50, Version: 1, CauseId: "p2", At: at(3)},
		&bankv1.BalanceChanged{CustomerId: "bob", AccountId: "checking", DeltaCents: -20, BalanceCents: -20, Version: 1, CauseId: "o2", At: at(4)},
	)
	if accounts := h.Balance.Prefix(bankv1.BalanceKey{CustomerId: "ann"}, 1); len(accounts) != 2 {
		t.Errorf("ann has %d accounts, want 2: %v", len(accounts), accounts)
	}
}

// Messages without an account or a positive amount are consumed, and
// change nothing: an invalid order is skipped, an invalid payment is
// recorded as a dead letter, with its journal and offsets, once.
func TestInvalidMessagesAreSkipped(t *testing.T) {
	h := ledgertest.New(t, ledger.NewLedgerHandler())
	h.Order(order("o1", "ann", "", 300, 1))
	p1 := h.Payment(payment("p1", "ann", "checking", 0, 2))
	p2 := h.Payment(payment("p2", "", "checking", 10, 3))
	h.Crash() // The dead letters of a lost transaction are never read.
	if st := h.Commit(); st.Messages != 3 || st.DeadLettered != 2 {
		t.Fatalf("the transaction consumed %d messages, dead-lettered %d; want 3, 2", st.Messages, st.DeadLettered)
	}
	h.Balance.Expect()
	h.CustomerActivity.Expect()
	h.Published.BalanceChanged.Expect()
	dead := h.DeadLetters()
	if len(dead) != 2 {
		t.Fatalf("%d dead letters, want 2: %+v", len(dead), dead)
	}
	for i, a := range []struct {
		id  string
		app consumertest.Appended
	}{{"p1", p1}, {"p2", p2}} {
		if d := dead[i]; d.Journal != a.app.Journal || d.Begin != a.app.Begin || d.Handler != "OnPayment" ||
			!strings.Contains(string(d.Message), `"paymentId":"`+a.id+`"`) || !strings.Contains(d.Error, ledger.ErrInvalidPayment.Error()) {
			t.Errorf("dead letter %d: %+v, want payment %s at %s:%d", i, d, a.id, a.app.Journal, a.app.Begin)
		}
	}
}

// An order's amount is held until its payment comes: if none comes within
// the hold window, the hold is released, refunding the amount, once (a
// crash before the release commits releases it again, never twice).
func TestUnpaidHoldIsReleased(t *testing.T) {
	h := ledgertest.New(t, ledger.NewLedgerHandler().WithHoldWindow(10*time.Minute))
	h.Order(order("o1", "ann", "checking", 300, 1))
	h.Commit()
	h.HoldTable.Expect(&bankv1.Hold{CustomerId: "ann", OrderId: "o1", AccountId: "checking", AmountCents: 300})
	h.Advance(9 * time.Minute)
	h.HoldTable.Expect(&bankv1.Hold{CustomerId: "ann", OrderId: "o1", AccountId: "checking", AmountCents: 300})

	h.Sleep(time.Minute)
	h.Crash() // Loses the release.
	h.HoldTable.Expect(&bankv1.Hold{CustomerId: "ann", OrderId: "o1", AccountId: "checking", AmountCents: 300})
	if st := h.Commit(); st.Fired != 1 {
		t.Fatalf("fired %d, want the hold's timer", st.Fired)
	}
	h.HoldTable.Expect()
	h.Balance.Expect(&bankv1.Balance{CustomerId: "ann", AccountId: "checking", BalanceCents: 0, Version: 2})
	events := h.Published.BalanceChanged.All()
	if len(events) != 2 || events[1].CauseId != ledger.ReleaseCause+"o1" || events[1].DeltaCents != 300 || events[1].Version != 2 {
		t.Fatalf("events %v, want the order's and its release's", events)
	}
	if st := h.Advance(time.Hour); st.Fired != 1 { // The account's idleness, not the hold again.
		t.Errorf("fired %d later, want 1 (the account falling idle)", st.Fired)
	}
	if n := len(h.Published.BalanceChanged.All()); n != 2 {
		t.Errorf("%d events after an hour, want 2", n)
	}
}

// A payment naming its order ends the order's hold, whether it comes after
// the order or before it: no hold is released.
func TestPaidHoldEnds(t *testing.T) {
	h := ledgertest.New(t, ledger.NewLedgerHandler().WithHoldWindow(10*time.Minute))
	paying := func(id, order string, cents int64) *bankv1.Payment {
		p := payment(id, "ann", "checking", cents, 2)
		p.OrderId = order
		return p
	}
	h.Order(order("o1", "ann", "checking", 300, 1))
	h.Commit()
	h.Payment(paying("p1", "o1", 300))
	h.Commit()
	h.Payment(paying("p2", "o2", 50)) // Before its order.
	h.Commit()
	h.HoldTable.Expect(&bankv1.Hold{CustomerId: "ann", OrderId: "o2", AccountId: "checking", AmountCents: 50, Paid: true})
	h.Order(order("o2", "ann", "checking", 50, 3))
	h.Commit()
	h.HoldTable.Expect()
	h.Advance(time.Hour)
	for _, e := range h.Published.BalanceChanged.All() {
		if strings.HasPrefix(e.CauseId, ledger.ReleaseCause) {
			t.Errorf("a paid order's hold was released: %v", e)
		}
	}
	h.Balance.Expect(&bankv1.Balance{CustomerId: "ann", AccountId: "checking", BalanceCents: 0, Version: 4})
}

// An account left alone for its RecentAccount's ttl falls idle: its row
// expires, and its balance's version joins its IdleAccount, each time once.
func TestIdleAccounts(t *testing.T) {
	h := ledgertest.New(t, ledger.NewLedgerHandler())
	h.Payment(payment("p1", "ann", "checking", 100, 1))
	h.Payment(payment("p2", "bob", "checking", 100, 1))
	h.Commit()
	h.RecentAccount.Expect(
		&bankv1.RecentAccount{CustomerId: "ann", AccountId: "checking", Version: 1},
		&bankv1.RecentAccount{CustomerId: "bob", AccountId: "checking", Version: 1},
	)
	h.Advance(3 * time.Second)
	h.Payment(payment("p3", "ann", "checking", 100, 2))
	h.Commit()
	h.Advance(3 * time.Second) // Bob's is 6 s old, ann's 3.
	h.RecentAccount.Expect(&bankv1.RecentAccount{CustomerId: "ann", AccountId: "checking", Version: 2})
	h.IdleAccount.Expect(&bankv1.IdleAccount{CustomerId: "bob", AccountId: "checking", Versions: []uint64{1}})
	h.Sleep(time.Minute)
	h.Crash()
	h.Commit()
	h.Payment(payment("p4", "ann", "checking", 100, 3))
	h.Commit()
	h.Advance(time.Minute)
	h.RecentAccount.Expect()
	h.IdleAccount.Expect(
		&bankv1.IdleAccount{CustomerId: "ann", AccountId: "checking", Versions: []uint64{2, 3}},
		&bankv1.IdleAccount{CustomerId: "bob", AccountId: "checking", Versions: []uint64{1}},
	)
}

// A message delivered twice, as a retrying producer delivers it, changes
// its balance once.
func TestDuplicatesChangeBalancesOnce(t *testing.T) {
	h := ledgertest.New(t, ledger.NewLedgerHandler())
	p := h.Payment(payment("p1", "ann", "checking", 100, 1))
	h.Redeliver(p)
	h.Commit()
	h.Redeliver(p)
	h.Commit()
	h.Balance.Expect(&bankv1.Balance{CustomerId: "ann", AccountId: "checking", BalanceCents: 100, Version: 1})
	if n := len(h.Published.BalanceChanged.All()); n != 1 {
		t.Errorf("published %d changes, want 1", n)
	}
}

// Orders and payments published in a transaction, as bankctl publishes
// them, are consumed once it commits.
func TestProducerTransactions(t *testing.T) {
	h := ledgertest.New(t, ledger.NewLedgerHandler())
	p := h.NewProducer()
	p.Payment(payment("p1", "ann", "checking", 100, 1))
	p.Order(order("o1", "ann", "checking", 30, 2))
	h.Commit()
	h.Balance.Expect()
	p.Commit()
	h.Commit()
	h.Balance.Expect(&bankv1.Balance{CustomerId: "ann", AccountId: "checking", BalanceCents: 70, Version: 2})
}

// A crash loses its transaction: neither its balances nor its events are
// committed. The next transaction consumes its messages again, and every
// message changes its balance, and is published, exactly once.
func TestCrashReplaysExactlyOnce(t *testing.T) {
	h := ledgertest.New(t, ledger.NewLedgerHandler())
	h.Payment(payment("p1", "ann", "checking", 1000, 1))
	h.Commit()
	for i := range 5 {
		h.Order(order(fmt.Sprintf("o%d", i), "ann", "checking", 10, 2+i))
	}
	h.Crash()
	h.Balance.Expect(&bankv1.Balance{CustomerId: "ann", AccountId: "checking", BalanceCents: 1000, Version: 1})
	if n := len(h.Published.BalanceChanged.All()); n != 1 {
		t.Fatalf("after the crash, %d changes are published, want 1", n)
	}
	h.Crash() // Once more, before the replay commits.
	if st := h.Commit(); st.Messages != 5 {
		t.Fatalf("the replay consumed %d messages, want 5", st.Messages)
	}
	h.Balance.Expect(&bankv1.Balance{CustomerId: "ann", AccountId: "checking", BalanceCents: 950, Version: 6})
	h.CustomerActivity.Expect(&bankv1.CustomerActivity{CustomerId: "ann", Orders: 5, OrderedCents: 50, Payments: 1, PaidCents: 1000, LastAt: at(6)})
	events := h.Published.BalanceChanged.All()
	if len(events) != 6 {
		t.Fatalf("published %d changes, want 6", len(events))
	}
	for i, ev := range events {
		if ev.Version != uint64(i+1) || ev.BalanceCents != 1000-10*int64(i) {
			t.Errorf("change %d: version %d, balance %d", i, ev.Version, ev.BalanceCents)
		}
	}
}
