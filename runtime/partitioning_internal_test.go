package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// A message whose partition key maps to another partition than the journal
// it was read from, under the partitioning the shard was built under, fails
// the shard, naming the journal and offset; every other passes.
func TestPartitionGuardChecksMessages(t *testing.T) {
	for n := 1; n <= 8; n++ {
		var fam = &family{typ: "test.M", n: n}
		for i := range n {
			var g, shard, err = guardOf(t, fam, i, mapKV{})
			if err != nil {
				t.Fatal(err)
			}
			for k := range 200 {
				var key = []byte(fmt.Sprintf("key-%d", k))
				var env = message.Envelope{Journal: fam.spec(i), Begin: pb.Offset(100 * k)}
				var err = g.checkMessage(shard, env, key)
				if want := partition.Index(key, n); want == i && err != nil {
					t.Fatalf("n=%d: key %q of partition %d in partition %d: %v", n, key, want, i, err)
				} else if want != i && (!errors.Is(err, ErrRepartitioned) || !strings.Contains(err.Error(), fmt.Sprintf("offset %d of journal %s", env.Begin, fam.journal(i)))) {
					t.Fatalf("n=%d: key %q of partition %d in partition %d: %v", n, key, want, i, err)
				}
			}
		}
	}
}

// FuzzPartitionGuard: a message passes if and only if its key maps to the
// partition it is in, under the partitioning the shard was built under,
// whatever the family became since.
func FuzzPartitionGuard(f *testing.F) {
	f.Add([]byte("customer-0001"), uint8(2), uint8(1), uint8(4))
	f.Add([]byte{}, uint8(1), uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, key []byte, n, i, grown uint8) {
		if n == 0 || n > 64 || grown == 0 || grown > 64 {
			return
		}
		i %= n
		var fam = &family{typ: "test.M", n: int(n)}
		var g, shard, err = guardOf(t, fam, int(i), mapKV{})
		if err != nil {
			t.Fatal(err)
		}
		fam.n = int(grown)
		var env = message.Envelope{Journal: fam.spec(int(i)), Begin: 7}
		err = g.checkMessage(shard, env, key)
		if (partition.Index(key, int(n)) == int(i)) != (err == nil) {
			t.Fatalf("key %x in partition %d of %d: %v", key, i, n, err)
		}
		if err = g.check(shard, "c"); (grown == n) != (err == nil) {
			t.Fatalf("built under %d, now %d: %v", n, grown, err)
		}
	})
}
