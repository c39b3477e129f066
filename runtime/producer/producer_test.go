package producer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
	"github.com/gazconsumer/gazconsumer/runtime/producer"
	"github.com/gazconsumer/gazconsumer/runtime/sequence"
	"github.com/gazconsumer/gazconsumer/specs"
)

// order and payment are journal messages of the shape of generated ones,
// of JSON framing, whose partition key is their customer.
type order struct {
	UUID     message.UUID
	Customer string
	N        int
}

func (m *order) GetUUID() message.UUID                         { return m.UUID }
func (m *order) SetUUID(u message.UUID)                        { m.UUID = u }
func (m *order) NewAcknowledgement(pb.Journal) message.Message { return new(order) }
func (m *order) AppendPartitionKey(b []byte) []byte            { return append(b, m.Customer...) }

type payment struct {
	UUID     message.UUID
	Customer string
	N        int
}

func (m *payment) GetUUID() message.UUID                         { return m.UUID }
func (m *payment) SetUUID(u message.UUID)                        { m.UUID = u }
func (m *payment) NewAcknowledgement(pb.Journal) message.Message { return new(payment) }
func (m *payment) AppendPartitionKey(b []byte) []byte            { return append(b, m.Customer...) }

// family returns the YAML of n partitions of messages of type typ.
func family(typ string, n int) string {
	return devstacktest.Journals(typ, n, 1<<20, labels.MessageType+"="+typ, labels.ContentType+"="+labels.ContentType_JSONLines)
}

func selector(typ string) string { return labels.MessageType + "=" + typ }

// readCommitted reads the messages of journal through its write head,
// read-committed, as a consumer does: acknowledgements left out.
func readCommitted[M any, PM interface {
	*M
	message.Message
}](t *testing.T, ctx context.Context, jc pb.RoutedJournalClient, journal pb.Journal) []PM {
	t.Helper()
	var head, err = client.Append(ctx, jc, pb.AppendRequest{Journal: journal})
	if err != nil {
		t.Fatalf("write head of %s: %v", journal, err)
	}
	var rr = client.NewRetryReader(ctx, jc, pb.ReadRequest{Journal: journal, EndOffset: head.Commit.End})
	var it = sequence.ReadCommitted(rr, func(*pb.JournalSpec) (message.Message, error) { return PM(new(M)), nil }, 1024)
	var out []PM
	for {
		var env, err = it.Next()
		if errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("reading %s: %v", journal, err)
		}
		if message.GetFlags(env.Message.GetUUID()) != message.Flag_ACK_TXN {
			out = append(out, env.Message.(PM))
		}
	}
}

// TestPartitionsAgreeAcrossCounts publishes orders and payments of many
// customers to families of as many partitions, for several counts: every
// message is in the partition of index partition.Index of its key, so
// that a customer's orders and payments are in partitions of one index,
// which one shard reads.
func TestPartitionsAgreeAcrossCounts(t *testing.T) {
	var counts = []int{1, 2, 3, 5, 8}
	var stack = devstacktest.StartT(t, "")
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, n := range counts {
		for _, typ := range []string{"orders", "payments"} {
			if _, err := specs.ApplyJournals(ctx, stack.Journals(), "test journals", []byte(family(fmt.Sprint(typ, n), n))); err != nil {
				t.Fatal(err)
			}
		}
	}
	var p = producer.New(ctx, stack.Journals())

	for _, n := range counts {
		var orders = producer.For[*order](p, selector(fmt.Sprintf("orders%d", n)))
		var payments = producer.For[*payment](p, selector(fmt.Sprintf("payments%d", n)))
		for i := range 60 {
			var c = fmt.Sprintf("customer-%d", i%23)
			if _, err := orders.Publish(&order{Customer: c, N: i}); err != nil {
				t.Fatal(err)
			}
			if _, err := payments.Publish(&payment{Customer: c, N: i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range counts {
		var seen = make(map[string]int) // Partition index of each customer.
		var total int
		check := func(family string, i int, customer string) {
			t.Helper()
			total++
			if want := partition.Index([]byte(customer), n); i != want {
				t.Errorf("%s of %d partitions: %s is in partition %d, not %d", family, n, customer, i, want)
			}
			if prev, ok := seen[customer]; ok && prev != i {
				t.Errorf("%s of %d partitions: %s is in partitions %d and %d", family, n, customer, prev, i)
			}
			seen[customer] = i
		}
		for i := range n {
			for _, m := range readCommitted[order](t, ctx, stack.Journals(), pb.Journal(fmt.Sprintf("orders%d/%02d", n, i))) {
				check("orders", i, m.Customer)
			}
			for _, m := range readCommitted[payment](t, ctx, stack.Journals(), pb.Journal(fmt.Sprintf("payments%d/%02d", n, i))) {
				check("payments", i, m.Customer)
			}
		}
		if total != 120 {
			t.Errorf("%d partitions: read %d messages, published 120", n, total)
		}
		if n > 1 && len(distinct(seen)) < 2 {
			t.Errorf("%d partitions: every customer is in one partition", n)
		}
	}
}

func distinct(m map[string]int) map[int]bool {
	var out = make(map[int]bool)
	for _, v := range m {
		out[v] = true
	}
	return out
}

// TestTxnIsReadOnceCommitted: a transaction's messages, appended already,
// are read by no read-committed reader until it commits, then all are.
func TestTxnIsReadOnceCommitted(t *testing.T) {
	var stack = devstacktest.StartT(t, family("orders", 2))
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var p = producer.New(ctx, stack.Journals())
	var orders = producer.For[*order](p, selector("orders"))
	var read = func() int {
		return len(readCommitted[order](t, ctx, stack.Journals(), "orders/00")) +
			len(readCommitted[order](t, ctx, stack.Journals(), "orders/01"))
	}

	tx, err := p.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Begin(); err == nil || !strings.Contains(err.Error(), "open already") {
		t.Fatalf("a second Begin: %v", err)
	}
	for i := range 10 {
		if err := orders.PublishIn(tx, &order{Customer: fmt.Sprint("c", i), N: i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Wait(ctx); err != nil { // The messages are in their journals...
		t.Fatal(err)
	}
	if n := read(); n != 0 { // ... but not committed.
		t.Fatalf("read %d messages of an open transaction", n)
	}
	// A message published committed meanwhile is read at once.
	if _, err := orders.Publish(&order{Customer: "outside"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if n := read(); n != 1 {
		t.Fatalf("read %d messages; want the one published committed", n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := read(); n != 11 {
		t.Fatalf("read %d messages once committed; want 11", n)
	}
	if err := orders.PublishIn(tx, &order{Customer: "late"}); err == nil || !strings.Contains(err.Error(), "transaction is done") {
		t.Fatalf("publishing in a committed transaction: %v", err)
	}
	// The next transaction begins.
	if tx, err = p.Begin(); err != nil {
		t.Fatal(err)
	} else if err = tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFailedCommitBreaksTheProducer: once a commit fails, the producer
// begins no transaction, which would commit the failed one's messages.
func TestFailedCommitBreaksTheProducer(t *testing.T) {
	var stack = devstacktest.StartT(t, family("orders", 1))
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var appendCtx, stopAppends = context.WithCancel(ctx)
	var p = producer.NewWith(client.NewAppendService(appendCtx, stack.Journals()), partition.NewWatched(ctx, stack.Journals()))
	var orders = producer.For[*order](p, selector("orders"))

	var tx, err = p.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err = orders.PublishIn(tx, &order{Customer: "c"}); err != nil {
		t.Fatal(err)
	}
	stopAppends()
	if err = tx.Commit(ctx); err == nil {
		t.Fatal("a commit whose appends were cancelled succeeded")
	}
	if _, err = p.Begin(); err == nil || !strings.Contains(err.Error(), "use a new Producer") {
		t.Fatalf("Begin after a failed commit: %v", err)
	}
}

// TestNoJournals: publishing a type of which no journal exists fails,
// naming the selector.
func TestNoJournals(t *testing.T) {
	var stack = devstacktest.StartT(t, family("orders", 1))
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var p = producer.New(ctx, stack.Journals())
	var _, err = producer.For[*payment](p, selector("payments")).Publish(&payment{Customer: "c"})
	if err == nil || !strings.Contains(err.Error(), "no journal is labeled "+selector("payments")) {
		t.Fatalf("publishing without journals: %v", err)
	}
}
