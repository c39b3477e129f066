package ledger_test

import (
	"fmt"
	"testing"
	"time"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/example/gen/bank/v1/ledgertest"
	"github.com/gazconsumer/gazconsumer/example/internal/ledger"
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
// change nothing.
func TestInvalidMessagesAreSkipped(t *testing.T) {
	h := ledgertest.New(t, ledger.NewLedgerHandler())
	h.Order(order("o1", "ann", "", 300, 1))
	h.Payment(payment("p1", "ann", "checking", 0, 2))
	h.Payment(payment("p2", "", "checking", 10, 3))
	if st := h.Commit(); st.Messages != 3 {
		t.Fatalf("the transaction consumed %d messages, want 3", st.Messages)
	}
	h.Balance.Expect()
	h.CustomerActivity.Expect()
	h.Published.BalanceChanged.Expect()
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
