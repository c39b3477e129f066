package acmev1

// This test is copied next to the generated acme/v1 package by
// TestBuildGoldens, and exercises the generated code.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// memKV is a runtime.KV over a map, sorting keys on Scan.
type memKV map[string][]byte

func (m memKV) Get(k []byte) ([]byte, bool, error) { v, ok := m[string(k)]; return v, ok, nil }
func (m memKV) Put(k, v []byte) error              { m[string(k)] = append([]byte(nil), v...); return nil }
func (m memKV) Delete(k []byte) error              { delete(m, string(k)); return nil }

// Now is the time of the transaction: memKV is a runtime.TimedKV, as the
// KV of the tables of a consumer whose rows expire (Spend's) must be.
func (m memKV) Now() time.Time { return time.Unix(0, 0) }
func (m memKV) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	var keys []string
	for k := range m {
		if k >= string(start) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !fn([]byte(k), m[k]) {
			break
		}
	}
	return nil
}

// memStore is a runtime.KVStore of a memKV, and a runtime.Savepointer
// (which the consumer's failure policy needs) of a copy of it.
type memStore struct{ kv, saved memKV }

func (s *memStore) Savepoint() { s.saved = maps.Clone(s.kv) }
func (s *memStore) RollbackToSavepoint() {
	clear(s.kv)
	maps.Copy(s.kv, s.saved)
}
func (s *memStore) ReleaseSavepoint() { s.saved = nil }

func (s *memStore) RestoreCheckpoint(runtime.Shard) (pc.Checkpoint, error) {
	return pc.Checkpoint{}, nil
}
func (s *memStore) StartCommit(runtime.Shard, pc.Checkpoint, client.OpFutures) client.OpFuture {
	return client.FinishedOperation(nil)
}
func (s *memStore) Destroy()       {}
func (s *memStore) KV() runtime.KV { return s.kv }

type fakeShard struct{}

func (fakeShard) Context() context.Context                 { return context.Background() }
func (fakeShard) Spec() *pc.ShardSpec                      { return &pc.ShardSpec{Id: "shard-000"} }
func (fakeShard) Assignment() keyspace.KeyValue            { return keyspace.KeyValue{} }
func (fakeShard) JournalClient() client.AsyncJournalClient { return nil }

func ts(sec int64) *timestamppb.Timestamp { return &timestamppb.Timestamp{Seconds: sec} }

func TestTableOrder(t *testing.T) {
	kv := memKV{}
	daily, spend := NewDailySpendTable(kv), NewSpendTable(kv)
	for _, r := range []*DailySpend{
		{CustomerId: "b", Day: ts(1), Cents: 1},
		{CustomerId: "a", Day: ts(1), Cents: 2},
		{CustomerId: "a", Day: ts(3), Cents: 3},
		{CustomerId: "a", Day: ts(2), Status: Status_STATUS_SHIPPED, Cents: 4},
		{CustomerId: "a", Day: ts(2), Cents: 5},
		{CustomerId: "a", Day: ts(2), Cents: 6, Delta: -5},
	} {
		if err := daily.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := spend.Put(&Spend{CustomerId: "a", Cents: 99}); err != nil {
		t.Fatal(err)
	}
	var got []int64
	collect := func(r *DailySpend) bool { got = append(got, r.Cents); return true }
	if err := daily.ScanPrefix(DailySpendKey{CustomerId: "a"}, 1, collect); err != nil {
		t.Fatal(err)
	}
	// Day descending, then status, then delta descending (0 before -5).
	if want := []int64{3, 5, 6, 4, 2}; !equal(got, want) {
		t.Errorf("ScanPrefix(a) = %v, want %v", got, want)
	}
	got = nil
	if err := daily.Scan(collect); err != nil {
		t.Fatal(err)
	}
	if want := []int64{3, 5, 6, 4, 2, 1}; !equal(got, want) {
		t.Errorf("Scan = %v, want %v (the Spend row must not appear)", got, want)
	}
	got = nil
	if err := daily.ScanRange(DailySpendKey{CustomerId: "a", Day: ts(3)}, DailySpendKey{CustomerId: "a", Day: ts(1)}, collect); err != nil {
		t.Fatal(err)
	}
	if want := []int64{3, 5, 6, 4}; !equal(got, want) {
		t.Errorf("ScanRange = %v, want %v", got, want)
	}
	row, ok, err := spend.Get(SpendKey{CustomerId: "a"})
	if err != nil || !ok || row.Cents != 99 {
		t.Errorf("Get = %v, %v, %v", row, ok, err)
	}
	if err := spend.Delete(SpendKey{CustomerId: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := spend.Get(SpendKey{CustomerId: "a"}); ok {
		t.Error("Get found a deleted row")
	}
	if err := daily.ScanPrefix(DailySpendKey{}, 8, collect); err == nil {
		t.Error("ScanPrefix of 8 of 7 key fields succeeded")
	}
}

// Rows come back from Get and every scan as they were put, though stored
// values leave out the key fields without presence (all but the Timestamp).
func TestTableRowsRoundTrip(t *testing.T) {
	kv := memKV{}
	daily := NewDailySpendTable(kv)
	rows := []*DailySpend{
		{CustomerId: "a", Day: ts(2), Status: Status_STATUS_SHIPPED, Gift: true, Region: 7, ShardHash: []byte{0, 1}, Delta: -5, Cents: 1},
		{CustomerId: "b", Day: ts(1), Cents: 2},
		{CustomerId: "", Cents: 3}, // Zero key fields, and no Timestamp.
	}
	for _, r := range rows {
		if err := daily.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range kv {
		var stored DailySpend
		if err := proto.Unmarshal(v, &stored); err != nil {
			t.Fatal(err)
		}
		if stored.CustomerId != "" || stored.Status != 0 || stored.Gift || stored.Region != 0 || stored.ShardHash != nil || stored.Delta != 0 || stored.Cents == 0 {
			t.Errorf("stored value %v holds key fields, or lacks cents", &stored)
		}
	}
	var scanned []*DailySpend
	if err := daily.Scan(func(r *DailySpend) bool { scanned = append(scanned, r); return true }); err != nil {
		t.Fatal(err)
	}
	if len(scanned) != len(rows) {
		t.Fatalf("scanned %d rows, want %d", len(scanned), len(rows))
	}
	for _, want := range rows {
		got, ok, err := daily.Get(daily.KeyOf(want))
		if err != nil || !ok || !proto.Equal(got, want) {
			t.Errorf("Get(%v) = %v, %v, %v; want %v", daily.KeyOf(want), got, ok, err, want)
		}
		var found bool
		for _, s := range scanned {
			found = found || proto.Equal(s, want)
		}
		if !found {
			t.Errorf("no scanned row is %v: %v", want, scanned)
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFraming(t *testing.T) {
	uuid := message.BuildUUID(message.ProducerID{1, 2, 3, 4, 5, 6}, 42, message.Flag_CONTINUE_TXN)
	for _, tc := range []struct {
		ct       string
		msg, out message.Message
	}{
		{labels.ContentType_ProtoFixed, &Order{CustomerId: "a", Items: []*Order_Item{{Sku: "x", Cents: 3}}, Payment: &Order_Card{Card: "c"}, Tags: map[string]string{"k": "v"}}, new(Order)},
		{labels.ContentType_JSONLines, &Total{CustomerId: "a", Day: ts(5), Cents: 7}, new(Total)},
	} {
		tc.msg.SetUUID(uuid)
		if tc.msg.GetUUID() != uuid {
			t.Fatalf("GetUUID = %v, want %v", tc.msg.GetUUID(), uuid)
		}
		f, err := message.FramingByContentType(tc.ct)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		bw := bufio.NewWriter(&buf)
		for i := 0; i < 2; i++ {
			if err := f.Marshal(tc.msg, bw); err != nil {
				t.Fatalf("%s: Marshal: %v", tc.ct, err)
			}
		}
		_ = bw.Flush()
		unmarshal := f.NewUnmarshalFunc(bufio.NewReader(&buf))
		for i := 0; i < 2; i++ {
			out := tc.out.NewAcknowledgement("")
			if err := unmarshal(out); err != nil {
				t.Fatalf("%s: Unmarshal: %v", tc.ct, err)
			}
			if !proto.Equal(out.(proto.Message), tc.msg.(proto.Message)) {
				t.Errorf("%s: read back %v, want %v", tc.ct, out, tc.msg)
			}
		}
	}
	if (&Order{Uuid: []byte{1, 2}}).GetUUID() != (message.UUID{}) {
		t.Error("GetUUID of a 2-byte uuid field is not zero")
	}
}

func TestNewMessage(t *testing.T) {
	spec := &pb.JournalSpec{Name: "acme/orders/part-000", LabelSet: pb.MustLabelSet(
		labels.ContentType, labels.ContentType_ProtoFixed, labels.MessageType, "acme.v1.Order")}
	if m, err := NewMessage(spec); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*Order); !ok {
		t.Fatalf("NewMessage = %T, want *Order", m)
	}
	for _, tc := range []struct {
		labels []string
		want   string
	}{
		{[]string{labels.ContentType, labels.ContentType_ProtoFixed}, "journal acme/orders/part-000 has no label app.gazette.dev/message-type"},
		{[]string{labels.MessageType, "acme.v1.Nope"}, `journal acme/orders/part-000: label app.gazette.dev/message-type="acme.v1.Nope" names no journal message`},
		{[]string{labels.ContentType, labels.ContentType_ProtoFixed, labels.MessageType, "acme.totals"}, `journal acme/orders/part-000: label content-type="application/x-protobuf-fixed", but messages of type acme.totals are framed as "application/x-ndjson"`},
	} {
		spec.LabelSet = pb.MustLabelSet(tc.labels...)
		if _, err := NewMessage(spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewMessage(%v) = %v, want error containing %q", tc.labels, err, tc.want)
		}
	}
}

type handler struct {
	finalized, begun, finished int
}

func (h *handler) BeginTxn(runtime.Shard, runtime.Store) error { h.begun++; return nil }
func (h *handler) FinishTxn(_ runtime.Shard, _ runtime.Store, err error) error {
	h.finished++
	return err
}

func (h *handler) OnReminder(*SpendCounterTxn, *Reminder) error {
	return errors.New("no reminder was set")
}

func (h *handler) OnOrder(tx *SpendCounterTxn, msg *Order) error {
	row, _, err := tx.Spend.Get(SpendKey{CustomerId: msg.CustomerId})
	if err != nil {
		return err
	} else if row == nil {
		row = &Spend{CustomerId: msg.CustomerId}
	}
	for _, it := range msg.Items {
		row.Cents += it.Cents
	}
	return tx.Spend.Put(row)
}

func (h *handler) FinalizeTxn(tx *SpendCounterTxn) error { h.finalized++; return nil }

func TestApplication(t *testing.T) {
	parts := &pb.ListResponse{}
	for _, n := range []pb.Journal{"acme/totals/part-000", "acme/totals/part-001", "acme/totals/part-002"} {
		parts.Journals = append(parts.Journals, pb.ListResponse_Journal{Spec: pb.JournalSpec{Name: n,
			LabelSet: pb.MustLabelSet(labels.ContentType, labels.ContentType_JSONLines, labels.MessageType, "acme.totals")}})
	}
	var gotSel pb.LabelSelector
	lister := runtime.PartitionListerFunc(func(sel pb.LabelSelector) message.PartitionsFunc {
		gotSel = sel
		return func() *pb.ListResponse { return parts }
	})
	h := new(handler)
	store := &memStore{kv: memKV{}}
	app, err := NewSpendCounterApplication(h, runtime.StoreOpenerFunc(func(runtime.Shard, runtime.Recorder) (runtime.Store, error) { return store, nil }), lister)
	if err != nil {
		t.Fatal(err)
	}
	if gotSel.String() != "app.gazette.dev/message-type=acme.totals" {
		t.Errorf("partitions selector %q", gotSel.String())
	}
	if _, err := app.NewStore(fakeShard{}, nil); err != nil {
		t.Fatal(err)
	}
	journal := &pb.JournalSpec{Name: "acme/orders"}
	if err := app.BeginTxn(fakeShard{}, store); err != nil || h.begun != 1 {
		t.Fatalf("BeginTxn: %v, begun %d", err, h.begun)
	}
	for i := 0; i < 3; i++ {
		env := message.Envelope{Journal: journal, Message: &Order{CustomerId: "a", Items: []*Order_Item{{Cents: 10}}}}
		if err := app.ConsumeMessage(fakeShard{}, store, env, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.FinalizeTxn(fakeShard{}, store, nil); err != nil || h.finalized != 1 {
		t.Fatalf("FinalizeTxn: %v, finalized %d", err, h.finalized)
	}
	failed := errors.New("failed")
	if err := app.FinishTxn(fakeShard{}, store, failed); err != failed || h.finished != 1 {
		t.Fatalf("FinishTxn: %v, finished %d", err, h.finished)
	}
	row, ok, err := NewSpendTable(store.kv).Get(SpendKey{CustomerId: "a"})
	if err != nil || !ok || row.Cents != 30 {
		t.Errorf("spend of a = %v, %v, %v; want 30 cents", row, ok, err)
	}
	// Unconsumed types are an error naming the consumer and the type (the
	// pipeline adds journal and offset, the service the shard).
	err = app.ConsumeMessage(fakeShard{}, store, message.Envelope{Journal: journal, Begin: 7, Message: &Total{}}, nil)
	if err == nil || err.Error() != "acme.v1.SpendCounter has no handler for *acmev1.Total" {
		t.Errorf("ConsumeMessage(Total) = %v", err)
	}
	// Handler errors are wrapped.
	app2, _ := NewSpendCounterApplication(failingHandler{}, nil, lister)
	err = app2.ConsumeMessage(fakeShard{}, store, message.Envelope{Journal: journal, Begin: 9, Message: &Order{}}, nil)
	if err == nil || err.Error() != "acme.v1.SpendCounter.OnOrder: spendcounter: OnOrder is not implemented" {
		t.Errorf("failing handler: %v", err)
	}
	// Totals of one customer and day have one partition key; of others,
	// others.
	keys := map[string]string{}
	for _, c := range []string{"a", "b", "c"} {
		for d := int64(0); d < 2; d++ {
			k := string((&Total{CustomerId: c, Day: ts(86400 * d), Cents: d}).AppendPartitionKey(nil))
			if other, ok := keys[k]; ok {
				t.Errorf("totals of %s/%d and %s share a partition key", c, d, other)
			}
			keys[k] = fmt.Sprintf("%s/%d", c, d)
			if k2 := string((&Total{CustomerId: c, Day: ts(86400 * d), Cents: 99}).AppendPartitionKey(nil)); k2 != k {
				t.Errorf("totals of %s/%d have partition keys %x and %x", c, d, k, k2)
			}
		}
	}
}

// failingHandler fails every message, as a scaffolded stub does.
type failingHandler struct{}

func (failingHandler) OnOrder(*SpendCounterTxn, *Order) error {
	return errors.New("spendcounter: OnOrder is not implemented")
}
func (failingHandler) OnReminder(*SpendCounterTxn, *Reminder) error {
	return errors.New("spendcounter: OnReminder is not implemented")
}
func (failingHandler) FinalizeTxn(*SpendCounterTxn) error { return nil }
