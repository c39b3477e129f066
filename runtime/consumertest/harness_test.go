package consumertest_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/consumertest"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
)

// add adds Value to the sum of Key.
type add struct {
	UUID  message.UUID
	Key   string
	Value int64
}

func (m *add) GetUUID() message.UUID                         { return m.UUID }
func (m *add) SetUUID(u message.UUID)                        { m.UUID = u }
func (m *add) NewAcknowledgement(pb.Journal) message.Message { return new(add) }

// total is the sum of Key after an add.
type total struct {
	UUID message.UUID
	Key  string
	Sum  int64
}

func (m *total) GetUUID() message.UUID                         { return m.UUID }
func (m *total) SetUUID(u message.UUID)                        { m.UUID = u }
func (m *total) NewAcknowledgement(pb.Journal) message.Message { return new(total) }

func keyOf(m message.Mappable, w io.Writer) {
	switch m := m.(type) {
	case *add:
		_, _ = io.WriteString(w, m.Key)
	case *total:
		_, _ = io.WriteString(w, m.Key)
	}
}

// summer keeps the sum of each key in its store, and publishes each new
// sum. It fails on the key "fail". It records the calls made to it.
type summer struct {
	stores runtime.StoreOpener
	totals message.MappingFunc
	calls  []string
}

func (s *summer) NewStore(shard runtime.Shard, rec runtime.Recorder) (runtime.Store, error) {
	return s.stores.OpenStore(shard, rec)
}

func (s *summer) NewMessage(spec *pb.JournalSpec) (message.Message, error) {
	if mt := spec.LabelSet.ValueOf(labels.MessageType); mt != "test.Add" {
		return nil, fmt.Errorf("journal %s holds %q", spec.Name, mt)
	}
	return new(add), nil
}

func (s *summer) ConsumeMessage(_ runtime.Shard, st runtime.Store, env message.Envelope, pub *message.Publisher) error {
	var m = env.Message.(*add)
	s.calls = append(s.calls, "consume "+m.Key)
	if m.Key == "fail" {
		return errors.New("failing as asked")
	}
	var kv = st.(runtime.KVStore).KV()
	var v, _, err = kv.Get([]byte(m.Key))
	if err != nil {
		return err
	}
	var sum int64
	if len(v) == 8 {
		sum = int64(binary.BigEndian.Uint64(v))
	}
	sum += m.Value
	if err = kv.Put([]byte(m.Key), binary.BigEndian.AppendUint64(nil, uint64(sum))); err != nil {
		return err
	}
	_, err = pub.PublishUncommitted(s.totals, &total{Key: m.Key, Sum: sum})
	return err
}

func (s *summer) FinalizeTxn(runtime.Shard, runtime.Store, *message.Publisher) error {
	s.calls = append(s.calls, "finalize")
	return nil
}

func (s *summer) BeginTxn(runtime.Shard, runtime.Store) error {
	s.calls = append(s.calls, "begin")
	return nil
}

func (s *summer) FinishTxn(_ runtime.Shard, _ runtime.Store, err error) error {
	s.calls = append(s.calls, fmt.Sprintf("finish %v", err != nil))
	return nil
}

// newHarness returns a harness of a summer.
func newHarness(t testing.TB, opts ...consumertest.Option) (*consumertest.Harness, *summer) {
	var app = new(summer)
	return consumertest.New(t, summerConsumer(app, keyOf), opts...), app
}

// summerConsumer describes app, reading adds of partition key key.
func summerConsumer(app *summer, key message.MappingKeyFunc) consumertest.Consumer {
	return consumertest.Consumer{
		Name: "test.Summer",
		NewApplication: func(stores runtime.StoreOpener, journals runtime.PartitionLister) (runtime.Application, error) {
			app.stores = stores
			app.totals = message.RendezvousMapping(keyOf, journals.Partitions(pb.MustLabelSelector("app.gazette.dev/message-type=test.Total")))
			return app, nil
		},
		Inputs: []consumertest.Input{{
			New: func() message.Message { return new(add) }, MessageType: "test.Add",
			ContentType: labels.ContentType_JSONLines, PartitionKey: key,
		}},
		Outputs: []consumertest.Output{{
			New: func() message.Message { return new(total) }, MessageType: "test.Total",
			ContentType: labels.ContentType_JSONLines, Selector: "app.gazette.dev/message-type=test.Total",
		}},
	}
}

// sums returns the sums the shard committed.
func sums(t testing.TB, h *consumertest.Harness) map[string]int64 {
	var out = make(map[string]int64)
	if err := h.State().Scan(nil, nil, func(k, v []byte) bool {
		out[string(k)] = int64(binary.BigEndian.Uint64(v))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func expectSums(t testing.TB, h *consumertest.Harness, want map[string]int64) {
	t.Helper()
	var got = sums(t, h)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("committed sums %v, want %v", got, want)
	}
}

// A commit runs one transaction over every message fed, calling the
// application as the runtime does, and commits the store and the messages
// published.
func TestCommitRunsOneTransaction(t *testing.T) {
	var h, app = newHarness(t)
	var totals = consumertest.NewPublished[*total](h)
	var heads = make(pb.Offsets)
	for _, a := range []*add{{Key: "a", Value: 1}, {Key: "b", Value: 2}, {Key: "a", Value: 3}} {
		var at = h.Feed(a)
		heads[at.Journal] = at.End
	}
	expectSums(t, h, map[string]int64{}) // Nothing is consumed before Commit.
	var st = h.Commit()
	if st.Messages != 3 {
		t.Errorf("the transaction consumed %d messages, want 3", st.Messages)
	}
	if want := []string{"begin", "consume a", "consume b", "consume a", "finalize", "finish false"}; !slices.Equal(app.calls, want) {
		t.Errorf("calls %q, want %q", app.calls, want)
	}
	expectSums(t, h, map[string]int64{"a": 4, "b": 2})
	totals.Expect(&total{Key: "a", Sum: 1}, &total{Key: "b", Sum: 2}, &total{Key: "a", Sum: 4})
	for j, head := range heads {
		if got := h.Checkpoint().Sources[j].ReadThrough; got != head {
			t.Errorf("the checkpoint reads %s through %d, want %d", j, got, head)
		}
	}

	app.calls = nil
	if st = h.Commit(); st.Messages != 0 || len(app.calls) != 0 {
		t.Errorf("a commit with nothing to read: %+v, calls %q", st, app.calls)
	}
}

// A message delivered twice, as a producer retrying an append delivers it,
// is consumed once.
func TestDuplicatesAreConsumedOnce(t *testing.T) {
	var h, _ = newHarness(t)
	var a = h.Feed(&add{Key: "a", Value: 5})
	h.Redeliver(a)
	if st := h.Commit(); st.Messages != 1 {
		t.Errorf("consumed %d messages, want 1", st.Messages)
	}
	h.Redeliver(a) // In a later transaction.
	h.Commit()
	expectSums(t, h, map[string]int64{"a": 5})
}

// Messages published within a transaction are consumed once it commits,
// however the messages of its partitions are read relative to each other.
func TestTransactionsAwaitTheirAcknowledgement(t *testing.T) {
	var h, _ = newHarness(t)
	var p = h.NewProducer()
	var first = p.Publish(&add{Key: "a", Value: 1})
	var journals = map[pb.Journal]bool{first.Journal: true}
	var published = 1
	for i := 0; len(journals) < 2; i++ { // Messages of each partition.
		journals[p.Publish(&add{Key: fmt.Sprintf("k%d", i), Value: 1}).Journal] = true
		published++
	}
	if st := h.Commit(); st.Messages != 0 {
		t.Fatalf("consumed %d uncommitted messages", st.Messages)
	}
	// The acknowledgement of the other partition is read first: only its
	// messages are consumed.
	h.Hold(first.Journal)
	var acks = p.Commit()
	if len(acks) != 2 {
		t.Fatalf("acknowledged %d partitions, want 2", len(acks))
	}
	if st := h.Commit(); st.Messages == 0 || sums(t, h)["a"] != 0 {
		t.Fatalf("with %s held, consumed %d messages and a = %d", first.Journal, st.Messages, sums(t, h)["a"])
	}
	h.Release(first.Journal)
	h.Commit()
	if got := sums(t, h)["a"]; got != 1 {
		t.Fatalf("a = %d once its partition is released, want 1", got)
	}
	var sum int64
	for _, v := range sums(t, h) {
		sum += v
	}
	if sum != int64(published) {
		t.Fatalf("sums add up to %d, want %d: each message consumed once", sum, published)
	}
}

// A crash loses the transaction it interrupts, whose messages the shard
// consumes again once restarted; the effects of every message on the store
// and on the published messages happen once.
func TestCrashReplaysFromTheCheckpoint(t *testing.T) {
	var h, app = newHarness(t, consumertest.Partitions(1))
	var totals = consumertest.NewPublished[*total](h)
	h.Feed(&add{Key: "a", Value: 1})
	h.Commit()
	var cp = h.Checkpoint()

	h.Feed(&add{Key: "a", Value: 10})
	h.Feed(&add{Key: "b", Value: 20})
	app.calls = nil
	h.Crash()
	if want := []string{"begin", "consume a", "consume b", "finalize", "finish false"}; !slices.Equal(app.calls, want) {
		t.Errorf("the crashed transaction's calls %q, want %q", app.calls, want)
	}
	expectSums(t, h, map[string]int64{"a": 1})
	totals.Expect(&total{Key: "a", Sum: 1})
	if got := h.Checkpoint(); got.String() != cp.String() {
		t.Errorf("the crash moved the checkpoint from %v to %v", cp, got)
	}

	h.Crash() // Again, before anything committed.
	app.calls = nil
	if st := h.Commit(); st.Messages != 2 {
		t.Errorf("the replay consumed %d messages, want 2", st.Messages)
	}
	expectSums(t, h, map[string]int64{"a": 11, "b": 20})
	totals.Expect(&total{Key: "a", Sum: 1}, &total{Key: "a", Sum: 11}, &total{Key: "b", Sum: 20})

	h.Crash() // With nothing to consume: a restart.
	h.Feed(&add{Key: "b", Value: 1})
	h.Commit()
	expectSums(t, h, map[string]int64{"a": 11, "b": 21})
	totals.Expect(&total{Key: "a", Sum: 1}, &total{Key: "a", Sum: 11}, &total{Key: "b", Sum: 20}, &total{Key: "b", Sum: 21})
}

// A failing handler fails the shard, naming the journal and offset; its
// transaction is lost, and the restarted shard meets the message again.
func TestFailureRestartsTheShard(t *testing.T) {
	var h, _ = newHarness(t)
	h.Feed(&add{Key: "a", Value: 1})
	var bad = h.Feed(&add{Key: "fail"})
	var _, err = h.TryCommit()
	if want := fmt.Sprintf("consuming journal %s offset %d: failing as asked", bad.Journal, bad.Begin); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("TryCommit: %v, want an error naming %q", err, want)
	}
	expectSums(t, h, map[string]int64{})
	if _, err = h.TryCommit(); err == nil {
		t.Fatal("the restarted shard consumed the failing message")
	}
}

// Published.Expect fails with the difference of what was published.
func TestExpectReportsADiff(t *testing.T) {
	var h, _ = newHarness(t)
	h.Feed(&add{Key: "a", Value: 1})
	h.Commit()
	var rec = &recorder{TB: t}
	var other, _ = newHarness(rec)
	other.Feed(&add{Key: "a", Value: 2})
	other.Commit()
	if consumertest.NewPublished[*total](other).Expect(&total{Key: "a", Sum: 1}) {
		t.Fatal("Expect of a wrong sum succeeded")
	}
	if !strings.Contains(rec.errors, "-want +got") || !strings.Contains(rec.errors, "Sum") {
		t.Fatalf("Expect reported %q", rec.errors)
	}
}

// recorder records the errors of a test rather than failing it.
type recorder struct {
	testing.TB
	errors string
}

func (r *recorder) Errorf(format string, args ...any) { r.errors += fmt.Sprintf(format, args...) }

// BenchmarkHarness measures messages a second consumed through Commit, in
// transactions of 1,000 messages of 100 keys which update a row and publish
// a message each (msgs/s), and, apart, messages a second fed (feed-msgs/s).
func BenchmarkHarness(b *testing.B) {
	var h, _ = newHarness(b)
	const txn = 1000
	var n int
	var feeding time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		var began = time.Now()
		for j := range txn {
			h.Feed(&add{Key: fmt.Sprintf("k%d", j%100), Value: int64(i)})
		}
		feeding += time.Since(began)
		b.StartTimer()
		n += h.Commit().Messages
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(n)/feeding.Seconds(), "feed-msgs/s")
}

// Messages of a type without a partition key all go to one partition,
// however many there are, so that a test's reads are deterministic.
func TestUnkeyedMessagesGoToOnePartition(t *testing.T) {
	var h = consumertest.New(t, summerConsumer(new(summer), nil), consumertest.Partitions(4))
	var journals = make(map[pb.Journal]bool)
	for i := range 40 {
		journals[h.Feed(&add{Key: fmt.Sprint("k", i), Value: 1}).Journal] = true
	}
	if len(journals) != 1 {
		t.Fatalf("40 messages without a partition key went to %d partitions: %v", len(journals), journals)
	}
	if st := h.Commit(); st.Messages != 40 {
		t.Fatalf("the transaction consumed %d messages, want 40", st.Messages)
	}
}
