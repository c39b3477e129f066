package load

import (
	"slices"
	"testing"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"google.golang.org/protobuf/proto"
)

func TestGenerateIsDeterministicAndRecordsItsOutcome(t *testing.T) {
	var opts = Options{Orders: 700, Payments: 500, Customers: 40, Accounts: 3, Seed: 7, TxnSize: 100}
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

	// The record agrees with the messages, recomputed here.
	var orders, payments int
	var balance = map[[2]string]int64{}
	for _, m := range msgs {
		switch m := m.(type) {
		case *bankv1.Order:
			orders++
			balance[[2]string{m.CustomerId, m.AccountId}] -= m.AmountCents
		case *bankv1.Payment:
			payments++
			balance[[2]string{m.CustomerId, m.AccountId}] += m.AmountCents
		}
	}
	if orders != 700 || payments != 500 || rec.Transactions != 12 {
		t.Errorf("%d orders, %d payments, %d transactions; want 700, 500, 12", orders, payments, rec.Transactions)
	}
	var changes uint64
	for _, b := range rec.Balances {
		changes += b.Changes
		if balance[[2]string{b.Customer, b.Account}] != b.Cents {
			t.Errorf("recorded balance of %s/%s is %d, messages sum to %d", b.Customer, b.Account, b.Cents, balance[[2]string{b.Customer, b.Account}])
		}
	}
	if changes != 1200 || len(rec.Balances) != len(balance) {
		t.Errorf("record has %d changes over %d balances; want 1200 over %d", changes, len(rec.Balances), len(balance))
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
