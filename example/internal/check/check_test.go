package check

import (
	"strings"
	"testing"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/example/internal/load"
	"google.golang.org/protobuf/proto"
)

// eventsOf returns the events the ledger publishes for msgs.
func eventsOf(msgs []any) []*bankv1.BalanceChanged {
	type key struct{ c, a string }
	var bal = map[key]*bankv1.Balance{}
	var out []*bankv1.BalanceChanged
	for _, m := range msgs {
		var k key
		var delta int64
		var cause string
		switch m := m.(type) {
		case *bankv1.Order:
			k, delta, cause = key{m.CustomerId, m.AccountId}, -m.AmountCents, m.OrderId
		case *bankv1.Payment:
			k, delta, cause = key{m.CustomerId, m.AccountId}, m.AmountCents, m.PaymentId
		}
		if bal[k] == nil {
			bal[k] = &bankv1.Balance{}
		}
		bal[k].BalanceCents += delta
		bal[k].Version++
		out = append(out, &bankv1.BalanceChanged{CustomerId: k.c, AccountId: k.a, DeltaCents: delta,
			BalanceCents: bal[k].BalanceCents, Version: bal[k].Version, CauseId: cause})
	}
	return out
}

func TestEventsFindsLossesAndRepeats(t *testing.T) {
	var msgs, rec, err = load.Generate(load.Options{Orders: 300, Payments: 300, Customers: 10, Accounts: 2, Seed: 3, TxnSize: 50})
	if err != nil {
		t.Fatal(err)
	}
	var in []any
	for _, m := range msgs {
		in = append(in, m)
	}
	var events = eventsOf(in)
	if p := Events(rec, events); len(p) != 0 {
		t.Fatalf("the ledger's exact events have problems: %v", p)
	}
	var cases = map[string]struct {
		events []*bankv1.BalanceChanged
		want   string
	}{
		"repeated": {append(append([]*bankv1.BalanceChanged{}, events...), proto.Clone(events[100]).(*bankv1.BalanceChanged)), "caused more than one event"},
		"lost":     {append(append([]*bankv1.BalanceChanged{}, events[:200]...), events[201:]...), "want one per order and payment"},
		"wrong": {func() []*bankv1.BalanceChanged {
			var e = append([]*bankv1.BalanceChanged{}, events...)
			e[50] = proto.Clone(e[50]).(*bankv1.BalanceChanged)
			e[50].BalanceCents++
			return e
		}(), "is not"},
	}
	for name, tc := range cases {
		var p = Events(rec, tc.events)
		if !strings.Contains(strings.Join(p, "\n"), tc.want) {
			t.Errorf("%s events: problems %v, want one saying %q", name, p, tc.want)
		}
	}
}
