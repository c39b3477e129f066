package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"

	"github.com/gazconsumer/gazconsumer/runtime/partition"
)

// testShard is a Shard reading sources.
type testShard struct{ spec pc.ShardSpec }

func (s *testShard) Context() context.Context                 { return context.Background() }
func (s *testShard) Spec() *pc.ShardSpec                      { return &s.spec }
func (s *testShard) Assignment() keyspace.KeyValue            { return keyspace.KeyValue{} }
func (s *testShard) JournalClient() client.AsyncJournalClient { return nil }

// mapKV is a KV of a map, without Scan.
type mapKV map[string][]byte

func (kv mapKV) Get(key []byte) ([]byte, bool, error) { v, ok := kv[string(key)]; return v, ok, nil }
func (kv mapKV) Put(key, value []byte) error          { kv[string(key)] = bytes.Clone(value); return nil }
func (kv mapKV) Delete(key []byte) error              { delete(kv, string(key)); return nil }
func (kv mapKV) Scan([]byte, []byte, func(key, value []byte) bool) error {
	return errors.New("not scanned")
}

// family is a listing of n journals of message type typ, which a test
// may grow.
type family struct {
	typ string
	n   int
}

func (f *family) journal(i int) pb.Journal {
	return pb.Journal(fmt.Sprintf("fam/%s/part-%03d", f.typ, i))
}

func (f *family) spec(i int) *pb.JournalSpec {
	return &pb.JournalSpec{Name: f.journal(i), LabelSet: pb.MustLabelSet(labels.MessageType, f.typ)}
}

func (f *family) list() *pb.ListResponse {
	var l = new(pb.ListResponse)
	for i := range f.n {
		l.Journals = append(l.Journals, pb.ListResponse_Journal{Spec: *f.spec(i)})
	}
	return l
}

// guardOf returns the partition guard of a shard reading partition i of
// fam, over kv and a store of its own.
func guardOf(t *testing.T, fam *family, i int, kv KV) (*partitionGuard, *testShard, error) {
	t.Helper()
	var a = &Adapter[any, *Txn]{
		c:      &Consumer[any, *Txn]{Name: "test.Consumer"},
		inputs: []*Input[any, *Txn]{{MessageType: MessageType{Name: fam.typ}}},
		journals: PartitionListerFunc(func(sel pb.LabelSelector) message.PartitionsFunc {
			if !sel.Matches(pb.MustLabelSet(labels.MessageType, fam.typ)) {
				t.Fatalf("listed %s", sel.String())
			}
			return fam.list
		}),
	}
	var shard = &testShard{spec: pc.ShardSpec{Id: "shard-x", Sources: []pc.ShardSpec_Source{{Journal: fam.journal(i)}}}}
	var g, err = a.guardPartitions(shard, new(struct{ Store }), kv)
	return g, shard, err
}

// A shard records the partitioning it is first built under, and fails once
// its family has other partitions, naming the shard, the family and both
// counts; a store recovered with the record is checked against it.
func TestPartitionGuardRecordsAndChecks(t *testing.T) {
	var fam = &family{typ: "test.M", n: 2}
	var kv = mapKV{}
	var g, shard, err = guardOf(t, fam, 1, kv)
	if err != nil {
		t.Fatal(err)
	}
	var rec Partitioning
	if err = json.Unmarshal(kv[PartitioningKey], &rec); err != nil || rec.Families["test.M"] != 2 || rec.Mapping != MappingVersion {
		t.Fatalf("recorded %q (%v)", kv[PartitioningKey], err)
	}
	if err = g.check(shard, "test.Consumer"); err != nil {
		t.Fatalf("as built: %v", err)
	}
	for _, n := range []int{3, 4, 1} {
		fam.n = n
		var err = g.check(shard, "test.Consumer")
		if !errors.Is(err, ErrRepartitioned) {
			t.Fatalf("%d partitions: %v", n, err)
		}
		for _, want := range []string{"shard shard-x", "message-type=test.M", fmt.Sprintf("now has %d partitions", n), "built under 2", "test.Consumer"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%d partitions: %q does not say %q", n, err, want)
			}
		}
	}
	// A new store of the same state (another assignment) reads the record:
	// built under 2, it fails under 4 from its first transaction.
	fam.n = 4
	g, shard, err = guardOf(t, fam, 1, kv)
	if err != nil {
		t.Fatal(err)
	} else if err = g.check(shard, "test.Consumer"); !errors.Is(err, ErrRepartitioned) {
		t.Fatalf("a recovered store under 4 partitions: %v", err)
	}
	// One whose record is of another mapping fails at once.
	kv[PartitioningKey] = []byte(`{"families":{"test.M":2},"mapping":7}`)
	if _, _, err = guardOf(t, fam, 1, kv); !errors.Is(err, ErrRepartitioned) || !strings.Contains(err.Error(), "version 7") {
		t.Fatalf("another mapping: %v", err)
	}
	kv[PartitioningKey] = []byte(`{"families":`)
	if _, _, err = guardOf(t, fam, 1, kv); err == nil || !strings.Contains(err.Error(), "decoding the partitioning") {
		t.Fatalf("a malformed record: %v", err)
	}
}

// Messages pass whatever their keys (producers may map keys otherwise), as
// long as the family of their journal has the partitions the shard was
// built under; once it has others, the next message fails the shard, within
// the transaction, naming both counts.
func TestPartitionGuardChecksMessagesJournals(t *testing.T) {
	for n := 1; n <= 8; n++ {
		var fam = &family{typ: "test.M", n: n}
		for i := range n {
			var g, shard, err = guardOf(t, fam, i, mapKV{})
			if err != nil {
				t.Fatal(err)
			}
			var env = message.Envelope{Journal: fam.spec(i), Begin: 100}
			for range 3 {
				if err = g.checkJournal(shard, env, "test.Consumer"); err != nil {
					t.Fatalf("n=%d: a message of partition %d: %v", n, i, err)
				}
			}
			fam.n = n + 1
			if err = g.checkJournal(shard, env, "test.Consumer"); !errors.Is(err, ErrRepartitioned) ||
				!strings.Contains(err.Error(), fmt.Sprintf("now has %d partitions, but the shard's state was built under %d", n+1, n)) {
				t.Fatalf("n=%d: a message once the family grew: %v", n, err)
			}
			fam.n = n
		}
	}
	// A journal of a family the shard was not built under is not checked.
	var fam = &family{typ: "test.M", n: 2}
	var g, shard, err = guardOf(t, fam, 0, mapKV{})
	if err != nil {
		t.Fatal(err)
	}
	var other = &family{typ: "test.Other", n: 3}
	if err = g.checkJournal(shard, message.Envelope{Journal: other.spec(0)}, "c"); err != nil {
		t.Fatalf("a journal of another family: %v", err)
	}
}

// FuzzPartitionGuard: a shard built under n partitions passes messages of
// its journals while the family has n, and fails them once it has other
// than n; a store recovered with the record fails as soon as it begins.
func FuzzPartitionGuard(f *testing.F) {
	f.Add(uint8(2), uint8(1), uint8(4))
	f.Add(uint8(1), uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, n, i, grown uint8) {
		if n == 0 || n > 64 || grown == 0 || grown > 64 {
			return
		}
		i %= n
		var fam = &family{typ: "test.M", n: int(n)}
		var kv = mapKV{}
		var g, shard, err = guardOf(t, fam, int(i), kv)
		if err != nil {
			t.Fatal(err)
		}
		var env = message.Envelope{Journal: fam.spec(int(i)), Begin: 7}
		if err = g.checkJournal(shard, env, "c"); err != nil {
			t.Fatalf("built under %d: %v", n, err)
		}
		fam.n = int(grown)
		if err = g.checkJournal(shard, env, "c"); (grown == n) != (err == nil) {
			t.Fatalf("built under %d, now %d: %v", n, grown, err)
		}
		if err = g.check(shard, "c"); (grown == n) != (err == nil) {
			t.Fatalf("built under %d, now %d: %v", n, grown, err)
		}
		g2, shard2, err := guardOf(t, fam, int(i), kv)
		if err != nil {
			t.Fatal(err)
		} else if err = g2.check(shard2, "c"); (grown == n) != (err == nil) {
			t.Fatalf("recovered, built under %d, now %d: %v", n, grown, err)
		}
	})
}

// laggingShard is a testShard whose spec lags its etcd: AwaitRevision
// applies the labels written up to the revision asked, as a member's
// KeySpace catches up.
type laggingShard struct {
	testShard
	cluster uint64
	labeled map[int64]string // LabelSplitTo's value written at each revision.
	awaited []int64
}

func (s *laggingShard) AwaitRevision(_ context.Context, hdr pb.Header_Etcd) error {
	s.awaited = append(s.awaited, hdr.Revision)
	if hdr.ClusterId != s.cluster {
		return fmt.Errorf("etcd cluster %x, not %x", s.cluster, hdr.ClusterId)
	}
	for rev, v := range s.labeled {
		if rev <= hdr.Revision {
			s.spec.LabelSet.SetValue(LabelSplitTo, v)
		}
	}
	return nil
}

// A shard that lists its family's new journals before its spec shows the
// rescale's label, written before them, reads its spec as of the listing's
// revision, and splits; one whose family grew without a label, or whose
// listing is of another etcd, still fails.
func TestPartitionGuardReadsSpecAsOfListing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		labeledAt int64  // Revision of the label, 0 if none.
		cluster   uint64 // Of the listing.
		wantErr   bool
	}{
		{"labeled before the journals", 5, 1, false},
		{"grown by hand", 0, 1, true},
		{"labeled after the listing", 9, 1, true},
		{"listed from another etcd", 5, 2, true},
		{"listing of no known etcd", 5, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var fam = &family{typ: "test.M", n: 2}
			var g, shard, err = guardOf(t, fam, 1, mapKV{})
			if err != nil {
				t.Fatal(err)
			}
			var lagging = &laggingShard{testShard: *shard, cluster: 1, labeled: map[int64]string{}}
			if tc.labeledAt != 0 {
				lagging.labeled[tc.labeledAt] = "4"
			}
			var list = g.lists["test.M"]
			g.lists["test.M"] = func() *pb.ListResponse {
				var l = list()
				l.Header.Etcd = pb.Header_Etcd{ClusterId: tc.cluster, Revision: 7}
				return l
			}
			fam.n = 4 // Created at revision 6, listed at 7.
			err = g.check(lagging, "test.Consumer")
			if tc.wantErr != (err != nil) || err != nil && !errors.Is(err, ErrRepartitioned) {
				t.Fatalf("check: %v (want an error: %t)", err, tc.wantErr)
			}
			if tc.cluster != 0 && (len(lagging.awaited) != 1 || lagging.awaited[0] != 7) {
				t.Errorf("awaited revisions %v, want [7]", lagging.awaited)
			}
		})
	}
}

// prefetchKV is a KVPrefetcher recording the keys it is asked to read
// ahead.
type prefetchKV struct {
	Store
	keys []string
}

func (s *prefetchKV) Prefetching() bool { return true }
func (s *prefetchKV) Prefetch(p *Prefetch) error {
	for i := range p.Len() {
		s.keys = append(s.keys, string(p.Key(i)))
	}
	return nil
}

// keyedMsg is a message partitioned by its key.
type keyedMsg struct {
	message.Message
	key string
}

func (m *keyedMsg) AppendPartitionKey(b []byte) []byte { return append(b, m.key...) }

// A shard whose state was split reads ahead the rows of the messages it
// owns only: those of another's it skips, and their rows are not its own.
// Before its split, and without a guard, it reads ahead every message's.
func TestPrefetchSkipsMessagesNotOwned(t *testing.T) {
	var a = &Adapter[any, *Txn]{c: &Consumer[any, *Txn]{Name: "test.Consumer"}}
	a.inputs = []*Input[any, *Txn]{{typ: reflect.TypeFor[*keyedMsg](), prefetch: func(msg message.Message, p *Prefetch) {
		p.Add(append(p.Append(), "row/"+msg.(*keyedMsg).key...))
	}}}
	var shard = &testShard{spec: pc.ShardSpec{Id: "shard-x"}}
	var store = new(prefetchKV)
	var msgs []message.Message
	var owned []string
	const of, index = 4, 1
	for i := range 64 {
		var m = &keyedMsg{key: fmt.Sprintf("key-%d", i)}
		msgs = append(msgs, m)
		if partition.Index([]byte(m.key), of) == index {
			owned = append(owned, "row/"+m.key)
		}
	}
	if len(owned) == 0 || len(owned) == len(msgs) {
		t.Fatalf("%d of %d keys owned: pick others", len(owned), len(msgs))
	}
	var all = func() []string {
		var out []string
		for _, m := range msgs {
			out = append(out, "row/"+m.(*keyedMsg).key)
		}
		return out
	}()

	var g = &partitionGuard{store: store}
	for _, tc := range []struct {
		name  string
		guard *partitionGuard
		want  []string
	}{
		{"without a guard", nil, all},
		{"not split", g, all},
		{"split", &partitionGuard{store: store, filter: &Ownership{Index: index, Of: of}}, owned},
		{"the guard of another store", &partitionGuard{store: new(prefetchKV), filter: &Ownership{Index: index, Of: of}}, all},
	} {
		a.guards.Delete(shard.spec.Id)
		if tc.guard != nil {
			a.guards.Store(shard.spec.Id, tc.guard)
		}
		store.keys = nil
		if err := a.Prefetch(shard, store, msgs); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(store.keys, tc.want) {
			t.Errorf("%s: read ahead %d keys %q, want %d", tc.name, len(store.keys), store.keys, len(tc.want))
		}
	}
}
