// Package load generates the example bank's input, publishes it to its
// journals exactly once, and keeps a Record of what it published and of the
// outcome that input must have, computed on its own, apart from the
// consumers' handlers.
//
// About half the orders are paid: a payment naming the order follows it at
// once, in the same or the next publisher transaction, and ends its hold.
// The others are never paid: the ledger releases each one's hold once its
// hold window passes, refunding its amount (a change of its balance). A few
// payments (Options.Poison) are invalid, of an amount that is not positive:
// the ledger records them as dead letters, and they change nothing.
package load

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/runtime/producer"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Options shape a load.
type Options struct {
	// Orders and Payments are the numbers of messages of each kind, and
	// Poison that of invalid payments beside them.
	Orders, Payments, Poison int
	// Customers is the number of customers, and Accounts the number of
	// accounts of each.
	Customers, Accounts int
	// Seed of the pseudo-random generator: equal options give equal input.
	Seed uint64
	// TxnSize is the number of messages of each publisher transaction.
	TxnSize int
}

// Validate reports an option out of range.
func (o Options) Validate() error {
	switch {
	case o.Orders < 0 || o.Payments < 0 || o.Poison < 0:
		return fmt.Errorf("numbers of orders (%d), payments (%d) and invalid payments (%d) may not be negative", o.Orders, o.Payments, o.Poison)
	case o.Customers < 1 || o.Accounts < 1:
		return fmt.Errorf("at least one customer (not %d) with one account (not %d) is needed", o.Customers, o.Accounts)
	case o.TxnSize < 1:
		return fmt.Errorf("transaction size %d is not positive", o.TxnSize)
	}
	return nil
}

// Messages returns the number of messages of the load, invalid payments
// included.
func (o Options) Messages() int { return o.Orders + o.Payments + o.Poison }

// Record is what a load published, and the outcome it must have.
type Record struct {
	Options Options
	// Transactions is the number of publisher transactions.
	Transactions int
	// Balances are the expected balances, by customer and account.
	Balances []Balance
	// Activity is the expected activity, by customer.
	Activity []Activity
	// Paid is the number of orders paid (by a payment naming them), and
	// Unpaid the orders never paid, by order: the ledger refunds each once.
	Paid   int
	Unpaid []Unpaid
	// Poison are the invalid payments, by payment: the ledger records each
	// as a dead letter, once.
	Poison []Poison
}

// Unpaid is an order never paid, whose hold the ledger releases.
type Unpaid struct {
	Order, Customer, Account string
	Cents                    int64
}

// Poison is an invalid payment.
type Poison struct {
	Payment, Customer, Account string
}

// Changes returns the number of changes of balances the record expects:
// one per order, valid payment, and release of an unpaid order's hold.
func (r *Record) Changes() int { return r.Options.Orders + r.Options.Payments + len(r.Unpaid) }

// Balance is the expected balance of an account: the sum of its payments
// and of its unpaid orders (refunded) less the sum of its orders, changed
// once by each (an unpaid order twice).
type Balance struct {
	Customer, Account string
	Cents             int64
	Changes           uint64
}

// Activity is the expected activity of a customer.
type Activity struct {
	Customer                string
	Orders, Payments        uint64
	OrderedCents, PaidCents int64
	LastAt                  time.Time
}

// Top returns the n largest expected balances, in the leaderboard's order:
// by balance, largest first, then by customer and account.
func (r *Record) Top(n int) []Balance {
	var all = slices.Clone(r.Balances)
	slices.SortFunc(all, compareRank)
	return all[:min(n, len(all))]
}

// compareRank orders balances as the leaderboard's Rank table does.
func compareRank(a, b Balance) int {
	switch {
	case a.Cents != b.Cents:
		if a.Cents > b.Cents {
			return -1
		}
		return 1
	case a.Customer != b.Customer:
		if a.Customer < b.Customer {
			return -1
		}
		return 1
	case a.Account < b.Account:
		return -1
	case a.Account > b.Account:
		return 1
	}
	return 0
}

// WriteFile writes r to path as JSON.
func (r *Record) WriteFile(path string) error {
	var b, err = json.MarshalIndent(r, "", "  ")
	if err == nil {
		err = os.WriteFile(path, append(b, '\n'), 0o644)
	}
	if err != nil {
		return fmt.Errorf("writing record %s: %w", path, err)
	}
	return nil
}

// ReadRecord reads a Record written by WriteFile.
func ReadRecord(path string) (*Record, error) {
	var b, err = os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading record: %w", err)
	}
	var r Record
	if err = json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decoding record %s: %w", path, err)
	}
	return &r, nil
}

// epoch is the time of the first message of every load.
var epoch = time.Date(2026, time.January, 1, 9, 0, 0, 0, time.UTC)

// Generate returns the input of opts, in publishing order, and its Record.
func Generate(opts Options) ([]message.Message, *Record, error) {
	if err := opts.Validate(); err != nil {
		return nil, nil, err
	}
	var rng = rand.New(rand.NewPCG(opts.Seed, 0x6a7a))
	type key struct{ customer, account string }
	var balances = make(map[key]*Balance)
	var activity = make(map[string]*Activity)
	var msgs = make([]message.Message, 0, opts.Messages())

	var rec = &Record{Options: opts}
	var orders, payments, poison = opts.Orders, opts.Payments, opts.Poison
	for i := 0; orders+payments+poison > 0; i++ {
		var customer = fmt.Sprintf("customer-%04d", rng.IntN(opts.Customers))
		var account = fmt.Sprintf("account-%d", rng.IntN(opts.Accounts))
		var at = epoch.Add(time.Duration(i) * time.Second)
		if rng.IntN(orders+payments+poison) < poison {
			// Invalid: it changes nothing.
			poison--
			var id = fmt.Sprintf("poison-%05d", opts.Poison-poison)
			msgs = append(msgs, &bankv1.Payment{
				PaymentId: id, CustomerId: customer, AccountId: account, AmountCents: -rng.Int64N(1000), ReceivedAt: timestamppb.New(at),
			})
			rec.Poison = append(rec.Poison, Poison{Payment: id, Customer: customer, Account: account})
			continue
		}
		var k = key{customer, account}
		if balances[k] == nil {
			balances[k] = &Balance{Customer: customer, Account: account}
		}
		if activity[customer] == nil {
			activity[customer] = &Activity{Customer: customer}
		}
		var bal, act = balances[k], activity[customer]
		bal.Changes++
		act.LastAt = at // Messages are generated in time order.

		// Pick orders and payments in proportion to those left, so that
		// both run out together.
		if rng.IntN(orders+payments) < orders {
			orders--
			var cents = 1 + rng.Int64N(50_000)
			var id = fmt.Sprintf("order-%07d", opts.Orders-orders)
			bal.Cents -= cents
			act.Orders++
			act.OrderedCents += cents
			msgs = append(msgs, &bankv1.Order{
				OrderId: id, CustomerId: customer, AccountId: account,
				AmountCents: cents, PlacedAt: timestamppb.New(at),
			})
			if payments > 0 && rng.IntN(2) == 0 {
				// Paid at once, by a payment naming it.
				payments--
				rec.Paid++
				bal.Cents += cents
				bal.Changes++
				act.Payments++
				act.PaidCents += cents
				msgs = append(msgs, &bankv1.Payment{
					PaymentId: fmt.Sprintf("payment-%07d", opts.Payments-payments), CustomerId: customer, AccountId: account,
					AmountCents: cents, ReceivedAt: timestamppb.New(at), OrderId: id,
				})
			} else {
				// Never paid: its hold is released, refunding it.
				bal.Cents += cents
				bal.Changes++
				rec.Unpaid = append(rec.Unpaid, Unpaid{Order: id, Customer: customer, Account: account, Cents: cents})
			}
		} else {
			payments--
			var cents = 1 + rng.Int64N(60_000)
			bal.Cents += cents
			act.Payments++
			act.PaidCents += cents
			msgs = append(msgs, &bankv1.Payment{
				PaymentId: fmt.Sprintf("payment-%07d", opts.Payments-payments), CustomerId: customer, AccountId: account,
				AmountCents: cents, ReceivedAt: timestamppb.New(at),
			})
		}
	}

	rec.Transactions = (len(msgs) + opts.TxnSize - 1) / opts.TxnSize
	for _, b := range balances {
		rec.Balances = append(rec.Balances, *b)
	}
	slices.SortFunc(rec.Balances, func(a, b Balance) int {
		if a.Customer != b.Customer {
			return compareStrings(a.Customer, b.Customer)
		}
		return compareStrings(a.Account, b.Account)
	})
	for _, a := range activity {
		rec.Activity = append(rec.Activity, *a)
	}
	slices.SortFunc(rec.Activity, func(a, b Activity) int { return compareStrings(a.Customer, b.Customer) })
	return msgs, rec, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Publish publishes msgs through jc in transactions of txnSize messages,
// with the generated publishers of orders and payments: each
// transaction's messages become visible to read-committed readers
// (consumers) together, once it commits, and a message appended twice by a
// retry is read once. It calls progress, if not nil, with the number of
// messages committed so far after each transaction.
//
// The publishers route a customer's orders and payments to the partitions
// of the same index of their families, as the ledger's shards assume: their
// numbers of partitions must therefore be equal.
func Publish(ctx context.Context, jc pb.RoutedJournalClient, msgs []message.Message, txnSize int, progress func(committed int)) error {
	var orders, err = partitions(ctx, jc, "gazconsumer.example.bank.v1.Order")
	if err != nil {
		return err
	}
	payments, err := partitions(ctx, jc, "gazconsumer.example.bank.v1.Payment")
	if err != nil {
		return err
	}
	if len(orders.Journals) != len(payments.Journals) {
		return fmt.Errorf("%d order partitions and %d payment partitions: a customer's orders and payments must go to partitions of the same index, so their numbers must be equal",
			len(orders.Journals), len(payments.Journals))
	}

	var p = producer.New(ctx, jc)
	var pubOrder, pubPayment = bankv1.NewOrderPublisher(p), bankv1.NewPaymentPublisher(p)
	for begin := 0; begin < len(msgs); begin += txnSize {
		var end = min(begin+txnSize, len(msgs))
		tx, err := p.Begin()
		if err != nil {
			return err
		}
		for i, m := range msgs[begin:end] {
			switch m := m.(type) {
			case *bankv1.Order:
				err = pubOrder.PublishIn(tx, m)
			case *bankv1.Payment:
				err = pubPayment.PublishIn(tx, m)
			default:
				err = fmt.Errorf("a %T is neither an order nor a payment", m)
			}
			if err != nil {
				return fmt.Errorf("message %d: %w", begin+i, err)
			}
		}
		if err = tx.Commit(ctx); err != nil {
			return fmt.Errorf("messages %d to %d: %w", begin, end, err)
		}
		if progress != nil {
			progress(end)
		}
	}
	return nil
}

// PublishAt is Publish at rate messages a second, as bankctl publish
// --rate publishes: each transaction waits until its messages are due, n
// messages taking n/rate seconds from the start. A rate of 0 publishes as
// fast as Publish does.
func PublishAt(ctx context.Context, jc pb.RoutedJournalClient, msgs []message.Message, txnSize int, rate float64, progress func(committed int)) error {
	if rate < 0 {
		return fmt.Errorf("rate %v: not a number of messages a second", rate)
	}
	var start = time.Now()
	return Publish(ctx, jc, msgs, txnSize, func(n int) {
		if progress != nil {
			progress(n)
		}
		if rate == 0 {
			return
		}
		if ahead := time.Duration(float64(n)/rate*float64(time.Second)) - time.Since(start); ahead > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(ahead):
			}
		}
	})
}

// partitions lists the journals of messages of type messageType.
func partitions(ctx context.Context, jc pb.RoutedJournalClient, messageType string) (*pb.ListResponse, error) {
	var sel = pb.LabelSelector{Include: pb.MustLabelSet(labels.MessageType, messageType)}
	var list, err = client.ListAllJournals(ctx, jc, pb.ListRequest{Selector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing journals of %s: %w", messageType, err)
	} else if len(list.Journals) == 0 {
		return nil, fmt.Errorf("no journal is labeled %s (apply example/specs/journals.yaml)", sel)
	}
	return list, nil
}
