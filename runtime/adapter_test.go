package runtime_test

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/consumertest"
	"github.com/gazconsumer/gazconsumer/runtime/source"
)

// order and total are journal messages of the shape of generated ones:
// order has a partition key, total has none.
type order struct {
	UUID     message.UUID
	Customer string
	Cents    int64
}

func (m *order) GetUUID() message.UUID                         { return m.UUID }
func (m *order) SetUUID(u message.UUID)                        { m.UUID = u }
func (m *order) NewAcknowledgement(pb.Journal) message.Message { return new(order) }
func (m *order) AppendPartitionKey(b []byte) []byte            { return append(b, m.Customer...) }

type total struct {
	UUID     message.UUID
	Customer string
	Cents    int64
}

func (m *total) GetUUID() message.UUID                         { return m.UUID }
func (m *total) SetUUID(u message.UUID)                        { m.UUID = u }
func (m *total) NewAcknowledgement(pb.Journal) message.Message { return new(total) }

// counterHandler and counterTxn are the handler interface and transaction
// of consumer test.Counter, as generated: it sums orders by customer.
type counterHandler interface {
	OnOrder(tx *counterTxn, msg *order) error
	FinalizeTxn(tx *counterTxn) error
}

type counterTxn struct {
	runtime.Txn
	kv runtime.KV
}

func (tx *counterTxn) PublishTotal(msg *total) error { return tx.Publish(msg) }

var counter = &runtime.Consumer[counterHandler, *counterTxn]{
	Name:          "test.Counter",
	ShardDefaults: pc.ShardSpec{MaxTxnDuration: time.Second, HotStandbys: 2},
	Inputs: []runtime.Input[counterHandler, *counterTxn]{
		runtime.Handle("test.Order", labels.ContentType_JSONLines, "OnOrder", counterHandler.OnOrder),
	},
	Outputs:     []runtime.Output{runtime.Publishes[total]("app.gazette.dev/message-type=test.Total")},
	NewTxn:      func(kv runtime.KV) *counterTxn { return &counterTxn{kv: kv} },
	FinalizeTxn: counterHandler.FinalizeTxn,
}

// summer implements counterHandler and runtime.BeginFinisher, recording
// the calls made to it.
type summer struct{ calls []string }

func (s *summer) OnOrder(tx *counterTxn, msg *order) error {
	s.calls = append(s.calls, "order "+msg.Customer)
	if msg.Customer == "fail" {
		return errors.New("failing as asked")
	}
	var v, _, err = tx.kv.Get([]byte(msg.Customer))
	if err != nil {
		return err
	}
	var sum = msg.Cents
	if len(v) == 8 {
		sum += int64(binary.BigEndian.Uint64(v))
	}
	if err = tx.kv.Put([]byte(msg.Customer), binary.BigEndian.AppendUint64(nil, uint64(sum))); err != nil {
		return err
	}
	if tx.Envelope.Message != msg || tx.Shard == nil || tx.Store == nil {
		return errors.New("the transaction is not set for the message")
	}
	return tx.PublishTotal(&total{Customer: msg.Customer, Cents: sum})
}

func (s *summer) FinalizeTxn(tx *counterTxn) error {
	s.calls = append(s.calls, "finalize")
	return tx.Publish(&order{})
}

func (s *summer) BeginTxn(runtime.Shard, runtime.Store) error {
	s.calls = append(s.calls, "begin")
	return nil
}

func (s *summer) FinishTxn(runtime.Shard, runtime.Store, error) error {
	s.calls = append(s.calls, "finish")
	return nil
}

func TestAdapter(t *testing.T) {
	var s = new(summer)
	var h = consumertest.New(t, consumertest.Consumer{
		Name: counter.Name,
		NewApplication: func(stores runtime.StoreOpener, journals runtime.PartitionLister) (runtime.Application, error) {
			return runtime.NewAdapter(counter, counterHandler(s), stores, journals)
		},
		Inputs: []consumertest.Input{consumertest.InputOf[order]("test.Order", labels.ContentType_JSONLines)},
		Outputs: []consumertest.Output{consumertest.OutputOf[total]("test.Total", labels.ContentType_JSONLines,
			"app.gazette.dev/message-type=test.Total", "UUID")},
	})
	if spec := h.Spec(); spec.HotStandbys != 2 || spec.MaxTxnDuration != time.Second {
		t.Errorf("the shard spec %v lacks the consumer's defaults", spec)
	}
	var totals = consumertest.NewPublished[*total](h)
	h.Feed(&order{Customer: "ann", Cents: 2})
	h.Feed(&order{Customer: "bob", Cents: 3})
	h.Feed(&order{Customer: "ann", Cents: 5})
	// FinalizeTxn publishes an order, which the consumer doesn't publish.
	var _, err = h.TryCommit()
	if err == nil || !strings.Contains(err.Error(), "test.Counter: consumer test.Counter publishes no message of type *runtime_test.order") {
		t.Fatalf("publishing a type the consumer doesn't: %v", err)
	}
	if want := "begin order ann order bob order ann finalize finish"; strings.Join(s.calls, " ") != want {
		t.Errorf("calls %q, want %q", s.calls, want)
	}
	totals.Expect()

	var fail = new(summer)
	var h2 = consumertest.New(t, consumertest.Consumer{
		Name: counter.Name,
		NewApplication: func(stores runtime.StoreOpener, journals runtime.PartitionLister) (runtime.Application, error) {
			return runtime.NewAdapter(counter, counterHandler(fail), stores, journals)
		},
		Inputs: []consumertest.Input{consumertest.InputOf[order]("test.Order", labels.ContentType_JSONLines)},
		Outputs: []consumertest.Output{consumertest.OutputOf[total]("test.Total", labels.ContentType_JSONLines,
			"app.gazette.dev/message-type=test.Total", "UUID")},
	})
	h2.Feed(&order{Customer: "fail"})
	if _, err = h2.TryCommit(); err == nil || !strings.Contains(err.Error(), "test.Counter.OnOrder: failing as asked") {
		t.Errorf("a failing handler: %v", err)
	}
}

// published is a handler publishing each order's total, whose totals are
// read back through the harness.
type published struct{ summer }

func (p *published) FinalizeTxn(*counterTxn) error { return nil }

func TestAdapterPublishes(t *testing.T) {
	var h = consumertest.New(t, consumertest.Consumer{
		Name: counter.Name,
		NewApplication: func(stores runtime.StoreOpener, journals runtime.PartitionLister) (runtime.Application, error) {
			return runtime.NewAdapter(counter, counterHandler(new(published)), stores, journals)
		},
		Inputs: []consumertest.Input{consumertest.InputOf[order]("test.Order", labels.ContentType_JSONLines)},
		Outputs: []consumertest.Output{consumertest.OutputOf[total]("test.Total", labels.ContentType_JSONLines,
			"app.gazette.dev/message-type=test.Total", "UUID")},
	})
	h.Feed(&order{Customer: "ann", Cents: 2})
	h.Feed(&order{Customer: "bob", Cents: 3})
	h.Feed(&order{Customer: "ann", Cents: 5})
	h.Commit()
	consumertest.NewPublished[*total](h).Expect(
		&total{Customer: "ann", Cents: 2}, &total{Customer: "bob", Cents: 3}, &total{Customer: "ann", Cents: 7})
}

func TestAdapterNewMessage(t *testing.T) {
	var lister = runtime.PartitionListerFunc(func(pb.LabelSelector) message.PartitionsFunc { return nil })
	var a, err = runtime.NewAdapter(counter, counterHandler(new(summer)), nil, lister)
	if err != nil {
		t.Fatal(err)
	}
	var spec = &pb.JournalSpec{Name: "orders/part-00", LabelSet: pb.MustLabelSet(
		labels.ContentType, labels.ContentType_JSONLines, labels.MessageType, "test.Order")}
	if m, err := a.NewMessage(spec); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*order); !ok {
		t.Fatalf("NewMessage = %T, want *order", m)
	}
	for _, tc := range []struct {
		labels []string
		want   string
	}{
		{[]string{labels.ContentType, labels.ContentType_JSONLines}, "journal orders/part-00 has no label app.gazette.dev/message-type"},
		{[]string{labels.MessageType, "test.Nope"}, `journal orders/part-00: label app.gazette.dev/message-type="test.Nope" names no journal message of consumer test.Counter`},
		{[]string{labels.ContentType, labels.ContentType_ProtoFixed, labels.MessageType, "test.Order"}, `journal orders/part-00: label content-type="application/x-protobuf-fixed", but messages of type test.Order are framed as "application/x-ndjson"`},
	} {
		spec.LabelSet = pb.MustLabelSet(tc.labels...)
		if _, err := a.NewMessage(spec); err == nil || err.Error() != tc.want {
			t.Errorf("NewMessage(%v) = %v, want error %q", tc.labels, err, tc.want)
		}
		// The constructor the service resolves once a journal fails alike.
		if _, err := a.MessageConstructor(spec); err == nil || err.Error() != tc.want {
			t.Errorf("MessageConstructor(%v) = %v, want error %q", tc.labels, err, tc.want)
		}
	}
	spec.LabelSet = pb.MustLabelSet(labels.ContentType, labels.ContentType_JSONLines, labels.MessageType, "test.Order")
	if newOrder, err := a.MessageConstructor(spec); err != nil {
		t.Fatal(err)
	} else if m1, m2 := newOrder(), newOrder(); m1 == m2 {
		t.Fatal("MessageConstructor's constructor returned one message twice")
	} else if _, ok := m1.(*order); !ok {
		t.Fatalf("MessageConstructor's constructor made a %T, want *order", m1)
	}
	if got := a.StoreKind().String(); got != "STORE_KIND_ROCKSDB" {
		t.Errorf("StoreKind = %s, want the default STORE_KIND_ROCKSDB", got)
	}
	// A consumer with tables refuses a store which isn't a KVStore.
	a, _ = runtime.NewAdapter(counter, counterHandler(new(summer)), runtime.StoreOpenerFunc(
		func(runtime.Shard, runtime.Recorder) (runtime.Store, error) { return plainStore{}, nil }), lister)
	if _, err = a.NewStore(nil, nil); err == nil || !strings.Contains(err.Error(), "is not a runtime.KVStore, which its tables need") {
		t.Errorf("NewStore of a plain store: %v", err)
	}
	var bad = *counter
	bad.Outputs = []runtime.Output{runtime.Publishes[total]("not a selector!")}
	if _, err = runtime.NewAdapter(&bad, counterHandler(nil), nil, nil); err == nil || !strings.HasPrefix(err.Error(), "partitions of *runtime_test.total: ") {
		t.Errorf("NewAdapter with a bad selector: %v", err)
	}
}

// plainStore is a Store without a KV.
type plainStore struct{ runtime.Store }

func (plainStore) Destroy() {}

// flaky sums orders as summer does, then fails: always for customer
// "poison", and on the first call of each order of customer "flaky". Its
// failed calls have written their sums and published their totals.
type flaky struct {
	published
	seen map[int64]bool // Cents of the flaky orders called once.
}

func (f *flaky) OnOrder(tx *counterTxn, msg *order) error {
	if err := f.summer.OnOrder(tx, msg); err != nil {
		return err
	}
	switch {
	case msg.Customer == "poison":
		return errors.New("poisoned")
	case msg.Customer == "flaky" && !f.seen[msg.Cents]:
		f.seen[msg.Cents] = true
		return errors.New("not yet")
	}
	return nil
}

// Under a failure policy, a handler is retried from the transaction as it
// was before its failed call, whose writes and publications are dropped; a
// message whose handler still fails is recorded into the dead-letter
// journal, exactly once, though a crash replays its transaction.
func TestAdapterFailurePolicy(t *testing.T) {
	var c = *counter
	c.OnFailure = runtime.FailurePolicy{Retries: 2, DeadLetter: true}
	var f = &flaky{seen: map[int64]bool{}}
	var h = consumertest.New(t, consumertest.Consumer{
		Name: c.Name,
		NewApplication: func(stores runtime.StoreOpener, journals runtime.PartitionLister) (runtime.Application, error) {
			return runtime.NewAdapter(&c, counterHandler(f), stores, journals)
		},
		Inputs: []consumertest.Input{consumertest.InputOf[order]("test.Order", labels.ContentType_JSONLines)},
		Outputs: []consumertest.Output{consumertest.OutputOf[total]("test.Total", labels.ContentType_JSONLines,
			"app.gazette.dev/message-type=test.Total", "UUID")},
	}, consumertest.Partitions(1))
	h.Feed(&order{Customer: "flaky", Cents: 2})
	var poison = h.Feed(&order{Customer: "poison", Cents: 100})
	h.Feed(&order{Customer: "flaky", Cents: 3})
	h.Crash() // The dead letter's transaction is replayed, and recorded once.
	var began = h.Now()
	var st = h.Commit()
	// The flaky orders failed before the crash only (the handler remembers
	// them): the replay retries the poison alone.
	if st.Messages != 3 || st.Retries != 2 || st.DeadLettered != 1 {
		t.Errorf("stats: %d messages, %d retries, %d dead letters; want 3, 2, 1", st.Messages, st.Retries, st.DeadLettered)
	}
	// Backoffs pass on the harness's clock: 100ms and 200ms.
	if got := h.Now().Sub(began); got != 300*time.Millisecond {
		t.Errorf("the clock moved %v, want 300ms", got)
	}
	consumertest.NewPublished[*total](h).Expect(&total{Customer: "flaky", Cents: 2}, &total{Customer: "flaky", Cents: 5})
	var got = h.DeadLetters()
	if len(got) != 1 {
		t.Fatalf("dead letters %+v, want one", got)
	}
	var want = source.Skipped{Shard: "test.Counter", Journal: poison.Journal, Begin: poison.Begin, End: poison.End,
		Error: "poisoned", Handler: "OnOrder", Attempts: 3, Message: []byte(`{"UUID":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0],"Customer":"poison","Cents":100}`)}
	got[0].Message = nil // Not a protobuf message: not recorded.
	want.Message = nil
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("dead letter\n%+v, want\n%+v", got[0], want)
	}
	for customer, want := range map[string]int64{"flaky": 5, "poison": 0} {
		var v, _, err = h.State().Get([]byte(customer))
		if err != nil || len(v) != 8 && want != 0 || len(v) == 8 && int64(binary.BigEndian.Uint64(v)) != want {
			t.Errorf("sum of %s = %x, %v; want %d: a failed call's writes must be undone", customer, v, err, want)
		}
	}
}
