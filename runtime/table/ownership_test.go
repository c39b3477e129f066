package table_test

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/gazconsumer/gazconsumer/keyenc"
	"github.com/gazconsumer/gazconsumer/runtime/table"
)

// fieldsOwned owns the rows of fields by (name, number): fields with
// presence, which encode unset as their zero value.
var fieldsOwned = fields.Owned(func(k *fieldKey, b []byte) []byte {
	b = keyenc.AppendString(b, table.Value(k.Name), keyenc.Ascending)
	return keyenc.AppendInt(b, int64(table.Value(k.Number)), keyenc.Ascending)
})

// instantsOwned owns the rows of instants by seconds.
var instantsOwned = instants.Owned(func(k *instantKey, b []byte) []byte {
	return keyenc.AppendInt(b, k.Seconds, keyenc.Ascending)
})

func TestOwned(t *testing.T) {
	start, end := fields.Span()
	if fieldsOwned.Name != "fields" || !bytes.Equal(fieldsOwned.Start, start) || !bytes.Equal(fieldsOwned.End, end) || fieldsOwned.Unowned != "" {
		t.Fatalf("ownership %+v of table fields, of span [%x, %x)", fieldsOwned, start, end)
	}
	for _, row := range []*descriptorpb.FieldDescriptorProto{
		{Name: proto.String("a"), Number: proto.Int32(-3), Label: descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()},
		{Name: proto.String(""), Number: proto.Int32(0)},
		{}, // Unset: as its zero values.
		{Number: proto.Int32(1 << 30)},
	} {
		key := fields.AppendKey(nil, fields.KeyOf(row), fields.KeyFields())
		want := keyenc.AppendInt(keyenc.AppendString([]byte("pre"), row.GetName(), keyenc.Ascending), int64(row.GetNumber()), keyenc.Ascending)
		got, err := fieldsOwned.PartitionKey([]byte("pre"), key)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("partition key of row %v: %x, %v; want %x", row, got, err, want)
		}
	}
	other := instants.AppendKey(nil, instantKey{Seconds: 1}, 2)
	if _, err := fieldsOwned.PartitionKey(nil, other); err == nil || !strings.HasPrefix(err.Error(), "table fields: ") {
		t.Errorf("partition key of a key of another table: %v", err)
	}
	trailing := append(fields.AppendKey(nil, fieldKey{}, 3), 0x42)
	if _, err := fieldsOwned.PartitionKey(nil, trailing); err == nil {
		t.Error("partition key of a key with trailing bytes succeeded")
	}

	un := instants.Unowned("instants.proto:1:1: no partition key")
	start, end = instants.Span()
	if un.Name != "instants" || un.PartitionKey != nil || un.Unowned != "instants.proto:1:1: no partition key" ||
		!bytes.Equal(un.Start, start) || !bytes.Equal(un.End, end) {
		t.Errorf("Unowned: %+v", un)
	}
}

func TestValue(t *testing.T) {
	if table.Value[int32](nil) != 0 || table.Value(proto.String("x")) != "x" || table.Value[bool](nil) {
		t.Error("Value is not *p, or the zero value if p is nil")
	}
}

// FuzzOwnedPartitionKey checks that the partition key of any store key is
// that of the row it decodes to, or an error if it decodes to none.
func FuzzOwnedPartitionKey(f *testing.F) {
	prefix, _ := instants.Span()
	f.Add(instants.AppendKey(nil, instantKey{Seconds: -5, Nanos: 7}, 2)[len(prefix):])
	f.Add(instants.AppendKey(nil, instantKey{}, 1)[len(prefix):])
	f.Add([]byte{0xff, 0x00, 0x01})
	f.Fuzz(func(t *testing.T, rest []byte) {
		key := append(bytes.Clone(prefix), rest...)
		pk, err := instantsOwned.PartitionKey(nil, key)
		row, rerr := instants.Row(key, nil)
		if (err == nil) != (rerr == nil) {
			t.Fatalf("key %x: partition key error %v, row error %v", key, err, rerr)
		} else if err != nil {
			return
		}
		if want := keyenc.AppendInt(nil, row.GetSeconds(), keyenc.Ascending); !bytes.Equal(pk, want) {
			t.Fatalf("key %x of row %v: partition key %x, want %x", key, row, pk, want)
		}
		again, err := instantsOwned.PartitionKey(nil, instants.AppendKey(nil, instants.KeyOf(row), 2))
		if err != nil || !bytes.Equal(again, pk) {
			t.Fatalf("row %v re-encoded: partition key %x, %v; want %x", row, again, err, pk)
		}
	})
}
