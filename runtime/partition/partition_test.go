package partition_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"

	"github.com/gazconsumer/gazconsumer/runtime/partition"
)

type keyed []byte

func (k keyed) AppendPartitionKey(b []byte) []byte { return append(b, k...) }

// TestMappingPicksIndex: Mapping maps a key to the journal of index Index
// among those listed, for random keys and partition counts.
func TestMappingPicksIndex(t *testing.T) {
	var rng = rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 17; n++ {
		var list = new(pb.ListResponse)
		for i := range n {
			list.Journals = append(list.Journals, pb.ListResponse_Journal{Spec: pb.JournalSpec{Name: pb.Journal(fmt.Sprintf("f/part-%02d", i))}})
		}
		var mapping = partition.Mapping(partition.KeyOf, func() *pb.ListResponse { return list })
		var hit = make(map[int]bool)
		for range 200 {
			var key = make(keyed, rng.IntN(12))
			for i := range key {
				key[i] = byte(rng.UintN(256))
			}
			var j, _, err = mapping(key)
			if err != nil {
				t.Fatal(err)
			}
			var i = partition.Index(key, n)
			hit[i] = true
			if want := list.Journals[i].Spec.Name; j != want {
				t.Fatalf("%d partitions: key %x mapped to %s, Index says %s", n, []byte(key), j, want)
			}
		}
		if len(hit) != n {
			t.Errorf("%d partitions: 200 random keys hit %d of them", n, len(hit))
		}
	}
	if i := partition.Index([]byte("k"), 0); i != 0 {
		t.Errorf("Index of no partitions: %d", i)
	}
}

// TestMappingWithoutKey spreads messages without a partition key.
func TestMappingWithoutKey(t *testing.T) {
	var list = &pb.ListResponse{Journals: []pb.ListResponse_Journal{{Spec: pb.JournalSpec{Name: "a"}}, {Spec: pb.JournalSpec{Name: "b"}}}}
	var mapping = partition.Mapping(nil, func() *pb.ListResponse { return list })
	var hit = make(map[pb.Journal]bool)
	for range 100 {
		var j, _, err = mapping(keyed(nil))
		if err != nil {
			t.Fatal(err)
		}
		hit[j] = true
	}
	if len(hit) != 2 {
		t.Errorf("100 messages without a key went to %v", hit)
	}
	if _, _, err := partition.Mapping(partition.KeyOf, func() *pb.ListResponse { return new(pb.ListResponse) })(keyed("k")); err != message.ErrEmptyListResponse {
		t.Errorf("mapping among no journals: %v", err)
	}
}
