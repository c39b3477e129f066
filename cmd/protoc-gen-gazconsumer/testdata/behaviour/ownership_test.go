package ownershipv1

// This test is copied next to the generated ownership/v1 package by
// TestBuildGoldens. It checks the row ownership of the generated consumers:
// the partition key of each row of a table whose key carries the partition
// key's fields, decoded from the row's store key, is the AppendPartitionKey
// of a message of equal values, of either input, for values of every kind,
// with presence or not, unset or not, whatever the order and directions of
// the table's key fields; a table whose key lacks one has none, and says
// why, naming the table.

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gazconsumer/gazconsumer/runtime"
)

// values are the values of a partition key's fields.
type values struct {
	tenant  string
	region  Region
	shardNo int32
	big     int64
	u       uint64
	f32     uint32
	flag    bool
	blob    []byte
	at      *timestamppb.Timestamp
}

// randomValues returns values of r, often the edges of their types.
func randomValues(r *rand.Rand) values {
	edge := func() bool { return r.IntN(3) == 0 }
	var v values
	if !edge() {
		v.tenant = []string{"acme", "a\x00b", "é", "\xff"}[r.IntN(4)]
	}
	v.region = Region(r.IntN(4)) // Perhaps not a value of the enum.
	v.shardNo = []int32{0, -1, 1, math.MinInt32, math.MaxInt32, r.Int32() - r.Int32()}[r.IntN(6)]
	v.big = []int64{0, -1, math.MinInt64, math.MaxInt64, r.Int64() - r.Int64()}[r.IntN(5)]
	v.u = []uint64{0, 1, math.MaxUint64, r.Uint64()}[r.IntN(4)]
	v.f32 = []uint32{0, math.MaxUint32, r.Uint32()}[r.IntN(3)]
	v.flag = r.IntN(2) == 0
	switch r.IntN(3) {
	case 0: // Nil.
	case 1:
		v.blob = []byte{}
	default:
		v.blob = []byte{0, 0xff, byte(r.IntN(256))}
	}
	if !edge() {
		v.at = &timestamppb.Timestamp{Seconds: r.Int64N(1<<40) - 1<<39, Nanos: r.Int32N(1e9)}
	} else if r.IntN(2) == 0 {
		v.at = &timestamppb.Timestamp{}
	}
	return v
}

// ptr returns a pointer to v, or nil, one time in four, if v is zero (the
// field is then unset, which a partition key encodes as zero).
func ptr[T comparable](r *rand.Rand, v T) *T {
	var zero T
	if v == zero && r.IntN(4) == 0 {
		return nil
	}
	return &v
}

// ownership returns the ownership of table name of consumer c.
func ownership(t *testing.T, c []runtime.TableOwnership, name string) runtime.TableOwnership {
	t.Helper()
	for _, o := range c {
		if o.Name == name {
			return o
		}
	}
	t.Fatalf("no ownership of table %s", name)
	return runtime.TableOwnership{}
}

func TestOwnedPartitionKeys(t *testing.T) {
	tally := ownership(t, gazconsumerSplitterConsumer.Tables, "ownership.v1.Tally")
	optionals := ownership(t, gazconsumerSplitterConsumer.Tables, "ownership.v1.Optionals")
	if len(gazconsumerSplitterConsumer.Tables) != 2 || tally.PartitionKey == nil || optionals.PartitionKey == nil {
		t.Fatalf("consumer Splitter's tables are not both owned: %+v", gazconsumerSplitterConsumer.Tables)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		v := randomValues(r)
		ev := &Event{Tenant: v.tenant, Region: v.region, ShardNo: v.shardNo, Big: v.big, U: v.u, F32: v.f32, Flag: v.flag, Blob: v.blob, At: v.at, Amount: r.Int64()}
		want := ev.AppendPartitionKey([]byte("pre"))
		corr := &Correction{Tenant: ptr(r, v.tenant), Region: ptr(r, v.region), ShardNo: ptr(r, v.shardNo), Big: ptr(r, v.big),
			U: ptr(r, v.u), F32: ptr(r, v.f32), Flag: ptr(r, v.flag), Blob: v.blob, At: v.at}
		if got := corr.AppendPartitionKey([]byte("pre")); !bytes.Equal(got, want) {
			t.Fatalf("the inputs' partition keys of %+v differ: %x and %x", v, want, got)
		}

		row := &Tally{Rank: r.Int64() - r.Int64(), At: v.at, Flag: v.flag, Blob: v.blob, Tenant: v.tenant, U: v.u, Region: v.region,
			F32: v.f32, Big: v.big, ShardNo: v.shardNo, Id: []string{"", "x"}[r.IntN(2)], Amount: r.Int64()}
		key := gazconsumerTallyTable.AppendKey(nil, gazconsumerTallyTable.KeyOf(row), gazconsumerTallyTable.KeyFields())
		if got, err := tally.PartitionKey([]byte("pre"), key); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("partition key of Tally %v: %x, %v; want that of %v, %x", row, got, err, ev, want)
		}

		opt := &Optionals{Tenant: ptr(r, v.tenant), Region: ptr(r, v.region), ShardNo: ptr(r, v.shardNo), Big: ptr(r, v.big),
			U: ptr(r, v.u), F32: ptr(r, v.f32), Flag: ptr(r, v.flag), Blob: v.blob, At: v.at}
		key = gazconsumerOptionalsTable.AppendKey(nil, gazconsumerOptionalsTable.KeyOf(opt), gazconsumerOptionalsTable.KeyFields())
		if got, err := optionals.PartitionKey([]byte("pre"), key); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("partition key of Optionals %v: %x, %v; want that of %v, %x", opt, got, err, ev, want)
		}
	}

	// A key not of the table is an error, naming the table.
	other := gazconsumerOptionalsTable.AppendKey(nil, OptionalsKey{}, gazconsumerOptionalsTable.KeyFields())
	if _, err := tally.PartitionKey(nil, other); err == nil || !strings.Contains(err.Error(), "ownership.v1.Tally") {
		t.Errorf("partition key of a key of another table: %v", err)
	}
	start, end := gazconsumerTallyTable.Span()
	if !bytes.Equal(tally.Start, start) || !bytes.Equal(tally.End, end) {
		t.Errorf("span of Tally's ownership [%x, %x), want [%x, %x)", tally.Start, tally.End, start, end)
	}
}

func TestUnownedTable(t *testing.T) {
	tally := ownership(t, gazconsumerSummarizerConsumer.Tables, "ownership.v1.Tally")
	summary := ownership(t, gazconsumerSummarizerConsumer.Tables, "ownership.v1.Summary")
	if tally.PartitionKey == nil || tally.Unowned != "" {
		t.Errorf("Summarizer's Tally is not owned: %+v", tally)
	}
	const why = "ownership/v1/ownership.proto:137:3: table Summary (ownership/v1/ownership.proto:130:3) of consumer Summarizer has no key field region of type ownership.v1.Region"
	if summary.PartitionKey != nil || !strings.HasPrefix(summary.Unowned, why) {
		t.Errorf("Summarizer's Summary: partition key %v, unowned %q; want none, unowned %q...", summary.PartitionKey != nil, summary.Unowned, why)
	}
}
