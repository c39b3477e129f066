package check

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/example/internal/ledger"
	"github.com/gazconsumer/gazconsumer/example/internal/load"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/proto"
)

// eventsOf returns the events the ledger publishes for msgs, then for the
// releases of the holds of unpaid orders.
func eventsOf(msgs []any, unpaid []load.Unpaid) []*bankv1.BalanceChanged {
	type key struct{ c, a string }
	var bal = map[key]*bankv1.Balance{}
	var out []*bankv1.BalanceChanged
	for _, u := range unpaid {
		msgs = append(msgs, u)
	}
	for _, m := range msgs {
		var k key
		var delta int64
		var cause string
		switch m := m.(type) {
		case *bankv1.Order:
			k, delta, cause = key{m.CustomerId, m.AccountId}, -m.AmountCents, m.OrderId
		case *bankv1.Payment:
			if m.AmountCents <= 0 {
				continue // A dead letter.
			}
			k, delta, cause = key{m.CustomerId, m.AccountId}, m.AmountCents, m.PaymentId
		case load.Unpaid:
			k, delta, cause = key{m.Customer, m.Account}, m.Cents, ledger.ReleaseCause+m.Order
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
	var msgs, rec, err = load.Generate(load.Options{Orders: 300, Payments: 300, Poison: 4, Customers: 10, Accounts: 2, Seed: 3, TxnSize: 50})
	if err != nil {
		t.Fatal(err)
	}
	var in []any
	for _, m := range msgs {
		in = append(in, m)
	}
	var events = eventsOf(in, rec.Unpaid)
	if p := Events(rec, events); len(p) != 0 {
		t.Fatalf("the ledger's exact events have problems: %v", p)
	}
	var cases = map[string]struct {
		events []*bankv1.BalanceChanged
		want   string
	}{
		"repeated":     {append(append([]*bankv1.BalanceChanged{}, events...), proto.Clone(events[100]).(*bankv1.BalanceChanged)), "caused more than one event"},
		"lost":         {append(append([]*bankv1.BalanceChanged{}, events[:200]...), events[201:]...), "want one per order, valid payment"},
		"not released": {events[:len(events)-1], "was never released"},
		"released twice": {append(append([]*bankv1.BalanceChanged{}, events...), proto.Clone(events[len(events)-1]).(*bankv1.BalanceChanged)),
			"caused more than one event"},
		"paid, released": {func() []*bankv1.BalanceChanged {
			var e = append([]*bankv1.BalanceChanged{}, events...)
			for i := range e {
				if o, ok := in[i].(*bankv1.Order); ok && !slices.ContainsFunc(rec.Unpaid, func(u load.Unpaid) bool { return u.Order == o.OrderId }) {
					e[len(e)-1] = proto.Clone(e[len(e)-1]).(*bankv1.BalanceChanged)
					e[len(e)-1].CauseId = ledger.ReleaseCause + o.OrderId
					return e
				}
			}
			panic("no paid order")
		}(), "but the order was paid"},
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

// DeadLetters finds invalid payments missing or repeated among the dead
// letters, and valid ones among them.
func TestDeadLetters(t *testing.T) {
	var msgs, rec, err = load.Generate(load.Options{Orders: 50, Payments: 50, Poison: 3, Customers: 5, Accounts: 2, Seed: 4, TxnSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	// Each message is at an offset of its index, in one journal.
	const journal = "bank/payments/part-00"
	var at = func(_ pb.Journal, o pb.Offset) (message.Message, error) { return msgs[o], nil }
	var dead []source.Skipped
	var valid source.Skipped
	for i, m := range msgs {
		if p, ok := m.(*bankv1.Payment); ok {
			var d = source.Skipped{Journal: journal, Begin: pb.Offset(i), Handler: "OnPayment", Message: json.RawMessage(`{"paymentId":"` + p.PaymentId + `"}`)}
			if p.AmountCents <= 0 {
				dead = append(dead, d)
			} else {
				valid = d
			}
		}
	}
	if p, err := DeadLetters(rec, dead, at); err != nil || len(p) != 0 {
		t.Fatalf("the exact dead letters: %v, %v", p, err)
	}
	for name, tc := range map[string]struct {
		dead []source.Skipped
		want string
	}{
		"missing":  {dead[1:], "is not a dead letter"},
		"repeated": {append(slices.Clone(dead), dead[0]), "is a dead letter twice"},
		"valid":    {append(slices.Clone(dead), valid), "is a dead letter, but valid"},
	} {
		if p, _ := DeadLetters(rec, tc.dead, at); !strings.Contains(strings.Join(p, "\n"), tc.want) {
			t.Errorf("%s: problems %v, want one saying %q", name, p, tc.want)
		}
	}
}
