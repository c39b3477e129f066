// Package check compares what the example bank's consumers hold and
// published with what a load's Record says they must: every balance and
// every customer's activity in the ledger, every standing and rank in the
// leaderboard, and every BalanceChanged event, each read exactly once; the
// holds of orders released exactly for the unpaid orders, each once; every
// account fallen idle once its last change is past; and every invalid
// payment a dead letter, once.
//
// What the ledger does at a time (releasing holds, accounts falling idle)
// comes its hold window and its RecentAccount's ttl after the last
// messages: until then, a check finds it missing, and may be run again.
package check

import (
	"fmt"
	"slices"
	"strings"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/example/internal/inspect"
	"github.com/gazconsumer/gazconsumer/example/internal/ledger"
	"github.com/gazconsumer/gazconsumer/example/internal/load"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
)

// maxProblems bounds the problems reported by each check.
const maxProblems = 20

// problems collects what differs from what is expected.
type problems struct {
	list    []string
	dropped int
}

func (p *problems) addf(format string, args ...any) {
	if len(p.list) < maxProblems {
		p.list = append(p.list, fmt.Sprintf(format, args...))
	} else {
		p.dropped++
	}
}

func (p *problems) result() []string {
	if p.dropped != 0 {
		p.list = append(p.list, fmt.Sprintf("... and %d more", p.dropped))
	}
	return p.list
}

type account struct{ customer, account string }

// Ledger checks the ledger's balances and activity against rec. It returns
// what differs.
func Ledger(rec *load.Record, snap *inspect.Snapshot) ([]string, error) {
	var p problems
	balances, err := snap.Balances()
	if err != nil {
		return nil, err
	}
	var got = make(map[account]*bankv1.Balance, len(balances))
	for _, b := range balances {
		got[account{b.CustomerId, b.AccountId}] = b
	}
	for _, want := range rec.Balances {
		var k = account{want.Customer, want.Account}
		var b, ok = got[k]
		delete(got, k)
		switch {
		case !ok:
			p.addf("ledger: balance of %s/%s is missing, want %d cents after %d changes", want.Customer, want.Account, want.Cents, want.Changes)
		case b.BalanceCents != want.Cents || b.Version != want.Changes:
			p.addf("ledger: balance of %s/%s is %d cents after %d changes, want %d cents after %d changes",
				want.Customer, want.Account, b.BalanceCents, b.Version, want.Cents, want.Changes)
		}
	}
	for k, b := range got {
		p.addf("ledger: unexpected balance of %s/%s: %d cents", k.customer, k.account, b.BalanceCents)
	}

	activities, err := snap.Activities()
	if err != nil {
		return nil, err
	}
	var acts = make(map[string]*bankv1.CustomerActivity, len(activities))
	for _, a := range activities {
		acts[a.CustomerId] = a
	}
	for _, want := range rec.Activity {
		var a, ok = acts[want.Customer]
		delete(acts, want.Customer)
		switch {
		case !ok:
			p.addf("ledger: activity of %s is missing", want.Customer)
		case a.Orders != want.Orders || a.OrderedCents != want.OrderedCents || a.Payments != want.Payments ||
			a.PaidCents != want.PaidCents || !a.LastAt.AsTime().Equal(want.LastAt):
			p.addf("ledger: activity of %s is %d orders of %d cents, %d payments of %d cents, last at %s; want %d, %d, %d, %d, %s",
				want.Customer, a.Orders, a.OrderedCents, a.Payments, a.PaidCents, a.LastAt.AsTime(),
				want.Orders, want.OrderedCents, want.Payments, want.PaidCents, want.LastAt)
		}
	}
	for c := range acts {
		p.addf("ledger: unexpected activity of %s", c)
	}
	if err = idleness(&p, rec, snap); err != nil {
		return nil, err
	}
	return p.result(), nil
}

// idleness checks that no hold is left (each order was paid, or its hold
// released), and that every account fell idle once since its last change,
// each time once: none is recent, and the versions at which each fell idle
// increase, ending at its last.
func idleness(p *problems, rec *load.Record, snap *inspect.Snapshot) error {
	holds, err := snap.Holds()
	if err != nil {
		return err
	}
	for _, h := range holds {
		p.addf("ledger: the hold of order %s of %s/%s (%d cents, paid %t) is left", h.OrderId, h.CustomerId, h.AccountId, h.AmountCents, h.Paid)
	}
	recent, err := snap.RecentAccounts()
	if err != nil {
		return err
	}
	for _, r := range recent {
		p.addf("ledger: account %s/%s has not fallen idle since version %d", r.CustomerId, r.AccountId, r.Version)
	}
	idle, err := snap.IdleAccounts()
	if err != nil {
		return err
	}
	var got = make(map[account]*bankv1.IdleAccount, len(idle))
	for _, a := range idle {
		got[account{a.CustomerId, a.AccountId}] = a
	}
	for _, want := range rec.Balances {
		var k = account{want.Customer, want.Account}
		var a, ok = got[k]
		delete(got, k)
		switch {
		case !ok:
			p.addf("ledger: account %s/%s never fell idle, want it idle at version %d", want.Customer, want.Account, want.Changes)
		case !slices.IsSorted(a.Versions) || len(slices.Compact(slices.Clone(a.Versions))) != len(a.Versions):
			p.addf("ledger: account %s/%s fell idle at versions %v: one of them twice, or out of order", want.Customer, want.Account, a.Versions)
		case a.Versions[len(a.Versions)-1] != want.Changes:
			p.addf("ledger: account %s/%s last fell idle at version %d, want %d", want.Customer, want.Account, a.Versions[len(a.Versions)-1], want.Changes)
		}
	}
	for k := range got {
		p.addf("ledger: unexpected idle account %s/%s", k.customer, k.account)
	}
	return nil
}

// Leaderboard checks the leaderboard's standings and ranks against rec: one
// standing and one rank per account, at its expected balance.
func Leaderboard(rec *load.Record, snap *inspect.Snapshot) ([]string, error) {
	var p problems
	standings, err := snap.Standings()
	if err != nil {
		return nil, err
	}
	var got = make(map[account]*bankv1.Standing, len(standings))
	for _, s := range standings {
		got[account{s.CustomerId, s.AccountId}] = s
	}
	for _, want := range rec.Balances {
		var k = account{want.Customer, want.Account}
		var s, ok = got[k]
		delete(got, k)
		switch {
		case !ok:
			p.addf("leaderboard: standing of %s/%s is missing", want.Customer, want.Account)
		case s.BalanceCents != want.Cents || s.Version != want.Changes:
			p.addf("leaderboard: standing of %s/%s is %d cents at version %d, want %d cents at version %d",
				want.Customer, want.Account, s.BalanceCents, s.Version, want.Cents, want.Changes)
		}
	}
	for k := range got {
		p.addf("leaderboard: unexpected standing of %s/%s", k.customer, k.account)
	}

	ranks, err := snap.Top(-1)
	if err != nil {
		return nil, err
	}
	var want = rec.Top(len(rec.Balances))
	if len(ranks) != len(want) {
		p.addf("leaderboard: %d ranks, want one per account: %d", len(ranks), len(want))
	}
	for i := range min(len(ranks), len(want)) {
		var r, w = ranks[i], want[i]
		if r.CustomerId != w.Customer || r.AccountId != w.Account || r.BalanceCents != w.Cents {
			p.addf("leaderboard: rank %d is %s/%s at %d cents, want %s/%s at %d cents",
				i+1, r.CustomerId, r.AccountId, r.BalanceCents, w.Customer, w.Account, w.Cents)
		}
	}
	return p.result(), nil
}

// Events checks the BalanceChanged events read (read-committed) against
// rec: each account's events are versions 1 to its number of changes, in
// order, each once, each balance the previous one plus the event's delta,
// ending at the expected balance; each order and valid payment caused
// exactly one event; and the holds released (events caused by
// ledger.ReleaseCause and an order) are those of the unpaid orders, each
// once, of their amounts.
func Events(rec *load.Record, events []*bankv1.BalanceChanged) []string {
	var p problems
	if want := rec.Changes(); len(events) != want {
		p.addf("events: read %d BalanceChanged events, want one per order, valid payment and unpaid order's release: %d", len(events), want)
	}
	var unpaid = make(map[string]load.Unpaid, len(rec.Unpaid))
	for _, u := range rec.Unpaid {
		unpaid[u.Order] = u
	}
	for _, e := range events {
		var order, ok = strings.CutPrefix(e.CauseId, ledger.ReleaseCause)
		if !ok {
			continue
		}
		switch u, ok := unpaid[order]; {
		case !ok:
			p.addf("events: the hold of order %s was released (%s/%s version %d), but the order was paid", order, e.CustomerId, e.AccountId, e.Version)
		case u.Customer != e.CustomerId || u.Account != e.AccountId || u.Cents != e.DeltaCents:
			p.addf("events: the hold of order %s was released to %s/%s for %d cents, want %s/%s for %d", order, e.CustomerId, e.AccountId, e.DeltaCents, u.Customer, u.Account, u.Cents)
		}
		delete(unpaid, order) // A second release is a second event of its cause, told below.
	}
	for _, u := range rec.Unpaid {
		if _, ok := unpaid[u.Order]; ok {
			p.addf("events: the hold of unpaid order %s of %s/%s was never released", u.Order, u.Customer, u.Account)
		}
	}
	var last = make(map[account]*bankv1.BalanceChanged)
	var causes = make(map[string]bool, len(events))
	for _, e := range events {
		if causes[e.CauseId] {
			p.addf("events: %s caused more than one event (the second: %s/%s version %d)", e.CauseId, e.CustomerId, e.AccountId, e.Version)
		}
		causes[e.CauseId] = true

		var k = account{e.CustomerId, e.AccountId}
		var prev, prevBalance, prevVersion = last[k], int64(0), uint64(0)
		if prev != nil {
			prevBalance, prevVersion = prev.BalanceCents, prev.Version
		}
		if e.Version != prevVersion+1 {
			p.addf("events: %s/%s version %d (%s) follows version %d", e.CustomerId, e.AccountId, e.Version, e.CauseId, prevVersion)
		} else if e.BalanceCents != prevBalance+e.DeltaCents {
			p.addf("events: %s/%s version %d: balance %d is not %d%+d", e.CustomerId, e.AccountId, e.Version, e.BalanceCents, prevBalance, e.DeltaCents)
		}
		last[k] = e
	}
	for _, want := range rec.Balances {
		var e = last[account{want.Customer, want.Account}]
		switch {
		case e == nil:
			p.addf("events: no event of %s/%s, want %d", want.Customer, want.Account, want.Changes)
		case e.Version != want.Changes || e.BalanceCents != want.Cents:
			p.addf("events: last event of %s/%s is version %d at %d cents, want version %d at %d cents",
				want.Customer, want.Account, e.Version, e.BalanceCents, want.Changes, want.Cents)
		}
	}
	return p.result()
}

// DeadLetters checks the ledger's dead letters (read-committed) against
// rec: each invalid payment is a dead letter once, of rpc OnPayment, whose
// journal holds the payment at the offset it names (as messageAt reads
// it), and nothing else is.
func DeadLetters(rec *load.Record, dead []source.Skipped, messageAt func(pb.Journal, pb.Offset) (message.Message, error)) ([]string, error) {
	var p problems
	var want = make(map[string]load.Poison, len(rec.Poison))
	for _, x := range rec.Poison {
		want[x.Payment] = x
	}
	var seen = make(map[string]bool, len(dead))
	for _, d := range dead {
		var msg, err = messageAt(d.Journal, d.Begin)
		if err != nil {
			return nil, err
		}
		var pay, ok = msg.(*bankv1.Payment)
		switch {
		case !ok:
			p.addf("dead letters: %s offset %d holds a %T, not a payment", d.Journal, d.Begin, msg)
			continue
		case seen[pay.PaymentId]:
			p.addf("dead letters: payment %s is a dead letter twice (%s offset %d)", pay.PaymentId, d.Journal, d.Begin)
		case d.Handler != "OnPayment" || !strings.Contains(string(d.Message), pay.PaymentId):
			p.addf("dead letters: the dead letter of %s offset %d is of rpc %q, message %s: not payment %s's", d.Journal, d.Begin, d.Handler, d.Message, pay.PaymentId)
		}
		seen[pay.PaymentId] = true
		if x, ok := want[pay.PaymentId]; !ok {
			p.addf("dead letters: payment %s (%s offset %d) is a dead letter, but valid: %s", pay.PaymentId, d.Journal, d.Begin, d.Error)
		} else if x.Customer != pay.CustomerId || x.Account != pay.AccountId {
			p.addf("dead letters: payment %s is of %s/%s, want %s/%s", pay.PaymentId, pay.CustomerId, pay.AccountId, x.Customer, x.Account)
		}
	}
	for _, x := range rec.Poison {
		if !seen[x.Payment] {
			p.addf("dead letters: invalid payment %s of %s/%s is not a dead letter", x.Payment, x.Customer, x.Account)
		}
	}
	return p.result(), nil
}
