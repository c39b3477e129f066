package load

import (
	"slices"
	"testing"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"google.golang.org/protobuf/proto"
)

func TestGenerateIsDeterministicAndRecordsItsOutcome(t *testing.T) {
	var opts = Options{Orders: 700, Payments: 500, Poison: 9, Customers: 40, Accounts: 3, Seed: 7, TxnSize: 100}
	var msgs, rec, err = Generate(opts)
	if err != nil {
		t.Fatal(err)
	}
	again, rec2, _ := Generate(opts)
	for i := range msgs {
		if !proto.Equal(msgs[i].(proto.Message), again[i].(proto.Message)) {
			t.Fatalf("message %d differs between two generations of one seed", i)
		}
	}
	if !slices.Equal(rec.Balances, rec2.Balances) {
		t.Fatal("records of one seed differ")
	}
	other, _, _ := Generate(Options{Orders: 700, Payments: 500, Customers: 40, Accounts: 3, Seed: 8, TxnSize: 100})
	if proto.Equal(msgs[0].(proto.Message), other[0].(proto.Message)) && proto.Equal(msgs[1].(proto.Message), other[1].(proto.Message)) {
		t.Error("seeds 7 and 8 generated the same first messages")
	}

	// The record agrees with the messages, recomputed here: orders not
	// paid by a payment naming them are refunded, invalid payments change
	// nothing.
	var orders, payments, poison int
	var balance = map[[2]string]int64{}
	var unpaid = map[string]int64{}
	var placed = map[string]int{} // Of each order, its index.
	for i, m := range msgs {
		switch m := m.(type) {
		case *bankv1.Order:
			orders++
			balance[[2]string{m.CustomerId, m.AccountId}] -= m.AmountCents
			unpaid[m.OrderId] = m.AmountCents
			placed[m.OrderId] = i
		case *bankv1.Payment:
			if m.AmountCents <= 0 {
				poison++
				continue
			}
			payments++
			balance[[2]string{m.CustomerId, m.AccountId}] += m.AmountCents
			if m.OrderId != "" {
				if i != placed[m.OrderId]+1 || unpaid[m.OrderId] != m.AmountCents {
					t.Errorf("payment %d of order %s is not the message after it, of its amount", i, m.OrderId)
				}
				delete(unpaid, m.OrderId)
			}
		}
	}
	for _, u := range rec.Unpaid {
		if unpaid[u.Order] != u.Cents {
			t.Errorf("order %s recorded unpaid, of %d cents; the messages say %d", u.Order, u.Cents, unpaid[u.Order])
		}
		balance[[2]string{u.Customer, u.Account}] += u.Cents
	}
	if orders != 700 || payments != 500 || poison != 9 || len(rec.Poison) != 9 || rec.Transactions != 13 {
		t.Errorf("%d orders, %d payments, %d (%d) invalid, %d transactions; want 700, 500, 9, 13", orders, payments, poison, len(rec.Poison), rec.Transactions)
	}
	if len(rec.Unpaid) != len(unpaid) || rec.Paid+len(rec.Unpaid) != 700 || rec.Paid < 100 || len(rec.Unpaid) < 100 {
		t.Errorf("%d orders paid and %d unpaid (%d by the messages), of 700", rec.Paid, len(rec.Unpaid), len(unpaid))
	}
	var changes uint64
	for _, b := range rec.Balances {
		changes += b.Changes
		if balance[[2]string{b.Customer, b.Account}] != b.Cents {
			t.Errorf("recorded balance of %s/%s is %d, messages sum to %d", b.Customer, b.Account, b.Cents, balance[[2]string{b.Customer, b.Account}])
		}
	}
	if int(changes) != 1200+len(rec.Unpaid) || int(changes) != rec.Changes() || len(rec.Balances) != len(balance) {
		t.Errorf("record has %d changes over %d balances; want %d over %d", changes, len(rec.Balances), 1200+len(rec.Unpaid), len(balance))
	}
	var top = rec.Top(5)
	for i := 1; i < len(top); i++ {
		if top[i-1].Cents < top[i].Cents {
			t.Errorf("Top is not by balance, largest first: %v", top)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, o := range []Options{
		{Orders: -1, Customers: 1, Accounts: 1, TxnSize: 1},
		{Orders: 1, Customers: 0, Accounts: 1, TxnSize: 1},
		{Orders: 1, Customers: 1, Accounts: 1, TxnSize: 0},
	} {
		if _, _, err := Generate(o); err == nil {
			t.Errorf("Generate(%+v) succeeded", o)
		}
	}
}
