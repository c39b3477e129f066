package acmev1_test

// This test is copied next to the generated acme/v1 package by
// TestBuildGoldens. It drives consumer SpendCounter through its generated
// test harness (package spendcountertest): typed feeds, transactions,
// duplicates, a producer's transaction, a crash and its replay, and typed
// reads of the tables and of the published totals.

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	acmev1 "example.test/golden/acme/v1"
	"example.test/golden/acme/v1/spendcountertest"
	"github.com/gazconsumer/gazconsumer/runtime/consumertest"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// spender totals the spend of each customer, by day too, and publishes each
// new total.
type spender struct{}

func (spender) OnOrder(tx *acmev1.SpendCounterTxn, msg *acmev1.Order) error {
	spend, _, err := tx.Spend.Get(acmev1.SpendKey{CustomerId: msg.CustomerId})
	if err != nil {
		return err
	} else if spend == nil {
		spend = &acmev1.Spend{CustomerId: msg.CustomerId}
	}
	var cents int64
	for _, it := range msg.Items {
		cents += it.Cents * int64(it.Quantity)
		spend.OrderSkus = append(spend.OrderSkus, it.Sku)
	}
	spend.Cents += cents
	if err := tx.Spend.Put(spend); err != nil {
		return err
	}
	key := acmev1.DailySpendKey{CustomerId: msg.CustomerId, Day: msg.PlacedAt, Status: msg.Status}
	daily, _, err := tx.DailySpend.Get(key)
	if err != nil {
		return err
	} else if daily == nil {
		daily = &acmev1.DailySpend{CustomerId: msg.CustomerId, Day: msg.PlacedAt, Status: msg.Status}
	}
	daily.Cents += cents
	if err := tx.DailySpend.Put(daily); err != nil {
		return err
	}
	return tx.PublishTotal(&acmev1.Total{CustomerId: msg.CustomerId, Day: msg.PlacedAt, Cents: spend.Cents})
}

func (spender) OnReminder(*acmev1.SpendCounterTxn, *acmev1.Reminder) error {
	return errors.New("no reminder was set")
}

func (spender) FinalizeTxn(*acmev1.SpendCounterTxn) error { return nil }

func day(n int64) *timestamppb.Timestamp { return &timestamppb.Timestamp{Seconds: n * 86400} }

func order(customer string, d int64, cents int64, sku string) *acmev1.Order {
	return &acmev1.Order{CustomerId: customer, PlacedAt: day(d), Status: acmev1.Status_STATUS_PLACED,
		Items: []*acmev1.Order_Item{{Sku: sku, Cents: cents, Quantity: 1}}}
}

func TestHarness(t *testing.T) {
	h := spendcountertest.New(t, spender{})
	h.Order(order("ann", 1, 100, "a1"))
	h.Order(order("bob", 1, 50, "b1"))
	again := h.Order(order("ann", 2, 10, "a2"))
	h.Redeliver(again) // A producer's retry: consumed once.
	if st := h.Commit(); st.Messages != 3 {
		t.Fatalf("the transaction consumed %d messages, want 3", st.Messages)
	}
	h.Spend.Expect(
		&acmev1.Spend{CustomerId: "ann", Cents: 110, OrderSkus: []string{"a1", "a2"}},
		&acmev1.Spend{CustomerId: "bob", Cents: 50, OrderSkus: []string{"b1"}},
	)
	if row, ok := h.Spend.Get(acmev1.SpendKey{CustomerId: "ann"}); !ok || row.Cents != 110 {
		t.Errorf("Spend of ann: %v, %v", row, ok)
	}
	if _, ok := h.Spend.Get(acmev1.SpendKey{CustomerId: "cyd"}); ok {
		t.Error("Spend of cyd exists")
	}
	// Days of a customer, latest first.
	if rows := h.DailySpend.Prefix(acmev1.DailySpendKey{CustomerId: "ann"}, 1); len(rows) != 2 || rows[0].Cents != 10 || rows[1].Cents != 100 {
		t.Errorf("daily spend of ann: %v", rows)
	}
	// Days descending: from day 1 to (before) day 0.
	if rows := h.DailySpend.Range(acmev1.DailySpendKey{CustomerId: "ann", Day: day(1)}, acmev1.DailySpendKey{CustomerId: "ann", Day: day(0)}); len(rows) != 1 || rows[0].Cents != 100 {
		t.Errorf("daily spend of ann on day 1: %v", rows)
	}
	h.Published.Total.Expect(
		&acmev1.Total{CustomerId: "ann", Day: day(1), Cents: 100},
		&acmev1.Total{CustomerId: "bob", Day: day(1), Cents: 50},
		&acmev1.Total{CustomerId: "ann", Day: day(2), Cents: 110},
	)

	// A producer's transaction is consumed once committed.
	p := h.NewProducer()
	p.Order(order("bob", 2, 5, "b2"))
	h.Commit()
	if row, _ := h.Spend.Get(acmev1.SpendKey{CustomerId: "bob"}); row.Cents != 50 {
		t.Errorf("an uncommitted order was consumed: %v", row)
	}
	p.Commit()
	h.Commit()
	if row, _ := h.Spend.Get(acmev1.SpendKey{CustomerId: "bob"}); row.Cents != 55 {
		t.Errorf("a committed order was not consumed: %v", row)
	}

	// A crash loses its transaction, which the next one replays: once.
	h.Order(order("ann", 3, 1, "a3"))
	h.Crash()
	if row, _ := h.Spend.Get(acmev1.SpendKey{CustomerId: "ann"}); row.Cents != 110 {
		t.Errorf("the crashed transaction committed: %v", row)
	}
	h.Commit()
	h.Spend.Expect(
		&acmev1.Spend{CustomerId: "ann", Cents: 111, OrderSkus: []string{"a1", "a2", "a3"}},
		&acmev1.Spend{CustomerId: "bob", Cents: 55, OrderSkus: []string{"b1", "b2"}},
	)
	h.Published.Total.Expect(
		&acmev1.Total{CustomerId: "ann", Day: day(1), Cents: 100},
		&acmev1.Total{CustomerId: "bob", Day: day(1), Cents: 50},
		&acmev1.Total{CustomerId: "ann", Day: day(2), Cents: 110},
		&acmev1.Total{CustomerId: "bob", Day: day(2), Cents: 55},
		&acmev1.Total{CustomerId: "ann", Day: day(3), Cents: 111},
	)
}

// flaky is a spender whose calls fail after their writes and publications:
// each order of sku "flaky" on its first call, and every order of sku
// "poison".
type flaky struct {
	spender
	called map[string]bool
}

func (f flaky) OnOrder(tx *acmev1.SpendCounterTxn, msg *acmev1.Order) error {
	if err := f.spender.OnOrder(tx, msg); err != nil {
		return err
	}
	switch sku := msg.Items[0].Sku; {
	case sku == "poison":
		return errors.New("poisoned")
	case sku == "flaky" && !f.called[msg.CustomerId]:
		f.called[msg.CustomerId] = true
		return errors.New("not yet")
	}
	return nil
}

// OnOrder's failure policy retries it once (the annotation): the retry
// starts from the transaction as it was before the failed call, whose
// writes and totals are gone; a second failure fails the shard, which
// commits nothing of its transaction.
func TestHarnessFailurePolicy(t *testing.T) {
	h := spendcountertest.New(t, flaky{called: map[string]bool{}})
	h.Order(order("ann", 1, 100, "flaky"))
	h.Order(order("bob", 1, 50, "b1"))
	if st := h.Commit(); st.Messages != 2 || st.Retries != 1 {
		t.Fatalf("the transaction consumed %d messages with %d retries, want 2 and 1", st.Messages, st.Retries)
	}
	h.Spend.Expect(
		&acmev1.Spend{CustomerId: "ann", Cents: 100, OrderSkus: []string{"flaky"}},
		&acmev1.Spend{CustomerId: "bob", Cents: 50, OrderSkus: []string{"b1"}},
	)
	h.Published.Total.Expect(
		&acmev1.Total{CustomerId: "ann", Day: day(1), Cents: 100},
		&acmev1.Total{CustomerId: "bob", Day: day(1), Cents: 50},
	)

	h.Order(order("bob", 2, 5, "poison"))
	if _, err := h.TryCommit(); err == nil || !strings.Contains(err.Error(), "acme.v1.SpendCounter.OnOrder: poisoned") {
		t.Fatalf("a handler failing twice: %v", err)
	}
	if row, _ := h.Spend.Get(acmev1.SpendKey{CustomerId: "bob"}); row.Cents != 50 {
		t.Errorf("the failed transaction committed: %v", row)
	}
	if got := h.DeadLetters(); len(got) != 0 {
		t.Errorf("dead letters of a policy that fails: %v", got)
	}
}

// expirer is a spender told of the Spend rows that expire (their ttl is
// 720h): it publishes a total of zero for the customer.
type expirer struct {
	spender
	expired *[]string
}

func (e expirer) OnExpireSpend(tx *acmev1.SpendCounterTxn, row *acmev1.Spend) error {
	*e.expired = append(*e.expired, fmt.Sprintf("%s at %v", row.CustomerId, tx.Now().Sub(consumertest.Epoch)))
	return tx.PublishTotal(&acmev1.Total{CustomerId: row.CustomerId, Cents: 0})
}

// A Spend row lives 720h after its last write, by the harness's clock: a
// transaction deletes it once its time is up, and tells the handler, within
// the transaction; a crash loses the expiry, which the next transaction
// makes again, once. A row written again lives on.
func TestHarnessTTL(t *testing.T) {
	var expired []string
	h := spendcountertest.New(t, expirer{expired: &expired})
	h.Order(order("ann", 1, 100, "a1"))
	h.Order(order("bob", 1, 50, "b1"))
	h.Commit()
	if st := h.Advance(360 * time.Hour); st.Fired != 0 {
		t.Errorf("%d fired at 360h", st.Fired)
	}
	h.Order(order("bob", 2, 5, "b2")) // Bob's row lives until 1080h.
	h.Commit()
	h.Advance(359 * time.Hour)
	h.Spend.Expect(
		&acmev1.Spend{CustomerId: "ann", Cents: 100, OrderSkus: []string{"a1"}},
		&acmev1.Spend{CustomerId: "bob", Cents: 55, OrderSkus: []string{"b1", "b2"}},
	)
	h.Crash() // At 719h: nothing is due.
	h.Spend.Expect(
		&acmev1.Spend{CustomerId: "ann", Cents: 100, OrderSkus: []string{"a1"}},
		&acmev1.Spend{CustomerId: "bob", Cents: 55, OrderSkus: []string{"b1", "b2"}},
	)
	if st := h.Advance(2 * time.Hour); st.Fired != 1 {
		t.Errorf("%d fired at 721h, want ann's row", st.Fired)
	}
	h.Spend.Expect(&acmev1.Spend{CustomerId: "bob", Cents: 55, OrderSkus: []string{"b1", "b2"}})
	if len(expired) != 1 || expired[0] != "ann at 721h0m0s" {
		t.Errorf("told of %v expiring, want ann at 721h", expired)
	}
	h.Published.Total.Expect(
		&acmev1.Total{CustomerId: "ann", Day: day(1), Cents: 100},
		&acmev1.Total{CustomerId: "bob", Day: day(1), Cents: 50},
		&acmev1.Total{CustomerId: "bob", Day: day(2), Cents: 55},
		&acmev1.Total{CustomerId: "ann", Cents: 0},
	)
	// Bob's row expires at 1080h; a crash loses its expiry, made again once.
	h.Sleep(359 * time.Hour) // 1080h, and no transaction yet.
	h.Crash()
	h.Spend.Expect(&acmev1.Spend{CustomerId: "bob", Cents: 55, OrderSkus: []string{"b1", "b2"}})
	if st := h.Commit(); st.Fired != 1 {
		t.Errorf("%d fired after the crash, want bob's row", st.Fired)
	}
	h.Spend.Expect()
	if got := h.Published.Total.All(); len(got) != 5 || got[4].CustomerId != "bob" {
		t.Errorf("totals %v: bob's expiry must publish once", got)
	}
	if len(expired) != 3 || expired[1] != "bob at 1080h0m0s" || expired[2] != expired[1] {
		t.Errorf("told of %v expiring: bob's twice, before and after the crash", expired)
	}
}

// reminding is a spender which reminds a customer of their spend a day
// after their last order (a Reminder timer, reset by each order), unless
// they order with sku "quiet" (which cancels it); a reminder publishes a
// total of minus the spend reminded of.
type reminding struct {
	spender
	fired *[]string
}

func (r reminding) OnOrder(tx *acmev1.SpendCounterTxn, msg *acmev1.Order) error {
	if err := r.spender.OnOrder(tx, msg); err != nil {
		return err
	}
	if msg.Items[0].Sku == "quiet" {
		_, err := tx.ReminderTimers.Cancel(acmev1.ReminderKey{CustomerId: msg.CustomerId})
		return err
	}
	spend, _, err := tx.Spend.Get(acmev1.SpendKey{CustomerId: msg.CustomerId})
	if err != nil {
		return err
	}
	return tx.ReminderTimers.SetAfter(&acmev1.Reminder{CustomerId: msg.CustomerId, Cents: spend.Cents}, 24*time.Hour)
}

func (r reminding) OnReminder(tx *acmev1.SpendCounterTxn, msg *acmev1.Reminder) error {
	*r.fired = append(*r.fired, fmt.Sprintf("%s %d at %v", msg.CustomerId, msg.Cents, tx.Now().Sub(consumertest.Epoch)))
	if _, _, ok, err := tx.ReminderTimers.Get(acmev1.ReminderKey{CustomerId: msg.CustomerId}); err != nil || ok {
		return fmt.Errorf("the timer firing is still set: %v, %v", ok, err)
	}
	return tx.PublishTotal(&acmev1.Total{CustomerId: msg.CustomerId, Cents: -msg.Cents})
}

// Timers fire by the harness's clock, within a transaction, once: set by a
// handler, reset by setting them again, cancelled; a crash loses a firing,
// which the next transaction makes again.
func TestHarnessTimers(t *testing.T) {
	var fired []string
	h := spendcountertest.New(t, reminding{fired: &fired})
	h.Order(order("ann", 1, 100, "a1"))
	h.Order(order("bob", 1, 50, "b1"))
	h.Order(order("cyd", 1, 7, "c1"))
	h.Commit()
	h.Advance(12 * time.Hour)
	h.Order(order("bob", 2, 5, "b2")) // Resets bob's reminder to 36h.
	h.Order(order("cyd", 2, 1, "quiet"))
	h.Commit()
	if st := h.Advance(12 * time.Hour); st.Fired != 1 {
		t.Errorf("%d fired at 24h, want ann's reminder", st.Fired)
	}
	h.Sleep(12 * time.Hour) // 36h: bob's is due, and lost by a crash.
	h.Crash()
	if st := h.Commit(); st.Fired != 1 {
		t.Errorf("%d fired at 36h, want bob's reminder", st.Fired)
	}
	if st := h.Advance(100 * time.Hour); st.Fired != 0 {
		t.Errorf("%d fired at 136h: cyd's reminder was cancelled", st.Fired)
	}
	want := []string{"ann 100 at 24h0m0s", "bob 55 at 36h0m0s", "bob 55 at 36h0m0s"}
	if strings.Join(fired, ", ") != strings.Join(want, ", ") {
		t.Errorf("fired %q, want %q (bob's twice: before and after the crash)", fired, want)
	}
	h.Published.Total.Expect(
		&acmev1.Total{CustomerId: "ann", Day: day(1), Cents: 100},
		&acmev1.Total{CustomerId: "bob", Day: day(1), Cents: 50},
		&acmev1.Total{CustomerId: "cyd", Day: day(1), Cents: 7},
		&acmev1.Total{CustomerId: "bob", Day: day(2), Cents: 55},
		&acmev1.Total{CustomerId: "cyd", Day: day(2), Cents: 8},
		&acmev1.Total{CustomerId: "ann", Cents: -100},
		&acmev1.Total{CustomerId: "bob", Cents: -55},
	)
}
