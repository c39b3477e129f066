package table_test

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/gazconsumer/gazconsumer/keyenc"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/codec"
	"github.com/gazconsumer/gazconsumer/runtime/table"
)

// sumKey keys sums: StringValues by their value, as the benchmark's
// Summer keys its sums by their key.
type sumKey struct{ Value string }

var sums = table.NewSchema(table.Def[sumKey, *wrapperspb.StringValue]{
	Name:   "sums",
	Key:    []string{"value"},
	KeyOf:  func(r *wrapperspb.StringValue) sumKey { return sumKey{r.GetValue()} },
	Fields: func(k *sumKey, c *table.Codec) { table.String(c, &k.Value, keyenc.Ascending) },
	Restore: func(k *sumKey, r *wrapperspb.StringValue) {
		r.Value = k.Value
	},
	Elided: []protowire.Number{1},
})

// handTable is the same table as code generated for it before package
// table: its key's encoding and the table's operations written out.
type handTable struct {
	kv  runtime.KV
	buf *[]byte
}

var handPrefix = keyenc.AppendString(nil, "sums", keyenc.Ascending)

func (k sumKey) appendTo(b []byte, n int) []byte {
	b = append(b, handPrefix...)
	if n > 0 {
		b = keyenc.AppendString(b, k.Value, keyenc.Ascending)
	}
	return b
}

func (t handTable) key(k sumKey) []byte {
	*t.buf = k.appendTo((*t.buf)[:0], 1)
	return *t.buf
}

func (t handTable) Get(key sumKey) (*wrapperspb.StringValue, bool, error) {
	v, found, err := t.kv.Get(t.key(key))
	if err != nil {
		return nil, false, fmt.Errorf("table sums: getting %v: %w", key, err)
	} else if !found {
		return nil, false, nil
	}
	r := new(wrapperspb.StringValue)
	if err := codec.Unmarshal(v, r); err != nil {
		return nil, false, fmt.Errorf("table sums: decoding row %v: %w", key, err)
	}
	r.Value = key.Value
	return r, true, nil
}

func (t handTable) Put(row *wrapperspb.StringValue) error {
	b, err := codec.Append((*t.buf)[:0], row)
	if err != nil {
		return fmt.Errorf("table sums: encoding row: %w", err)
	}
	if b, err = codec.StripFields(b, 1); err != nil {
		return fmt.Errorf("table sums: encoding row: %w", err)
	}
	nv := len(b)
	b = sumKey{row.GetValue()}.appendTo(b, 1)
	*t.buf = b
	if err := t.kv.Put(b[nv:], b[:nv]); err != nil {
		return fmt.Errorf("table sums: putting: %w", err)
	}
	return nil
}

// benchKV is a KV of one key, whose operations cost next to nothing.
type benchKV struct{ k, v []byte }

func (kv *benchKV) Get(k []byte) ([]byte, bool, error) { return kv.v, true, nil }
func (kv *benchKV) Put(k, v []byte) error {
	kv.k, kv.v = append(kv.k[:0], k...), append(kv.v[:0], v...)
	return nil
}
func (kv *benchKV) Delete([]byte) error                              { return nil }
func (kv *benchKV) Scan(_, _ []byte, _ func(k, v []byte) bool) error { return nil }

// benchGetPut gets and puts a row as the benchmark's Summer does for each
// message.
func benchGetPut(b *testing.B, get func(sumKey) (*wrapperspb.StringValue, bool, error), put func(*wrapperspb.StringValue) error) {
	var keys = make([]sumKey, 64)
	for i := range keys {
		keys[i] = sumKey{fmt.Sprintf("key-%06d", i)}
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var row, _, err = get(keys[i%len(keys)])
		if err != nil {
			b.Fatal(err)
		}
		if err = put(row); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetPut gets and puts rows through a Table, and through the
// equivalent code generated before package table ("generated").
func BenchmarkGetPut(b *testing.B) {
	b.Run("table", func(b *testing.B) {
		var tbl = sums.Open(&benchKV{v: []byte{}})
		benchGetPut(b, tbl.Get, tbl.Put)
	})
	b.Run("generated", func(b *testing.B) {
		var hand = handTable{kv: &benchKV{v: []byte{}}, buf: new([]byte)}
		benchGetPut(b, hand.Get, hand.Put)
	})
}
