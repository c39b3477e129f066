package table_test

import (
	"bytes"
	"cmp"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gazconsumer/gazconsumer/keyenc"
	"github.com/gazconsumer/gazconsumer/runtime/table"
)

// memKV is a runtime.KV over a map, sorting keys on Scan.
type memKV map[string][]byte

func (m memKV) Get(k []byte) ([]byte, bool, error) { v, ok := m[string(k)]; return v, ok, nil }
func (m memKV) Put(k, v []byte) error              { m[string(k)] = bytes.Clone(v); return nil }
func (m memKV) Delete(k []byte) error              { delete(m, string(k)); return nil }
func (m memKV) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	var keys []string
	for k := range m {
		if k >= string(start) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !fn([]byte(k), m[k]) {
			break
		}
	}
	return nil
}

// fieldKey is the key of fields: a table of FieldDescriptorProtos (proto2:
// every field has presence) keyed by (name, number descending, label), as
// protoc-gen-gazconsumer generates one.
type fieldKey struct {
	Name   *string
	Number *int32
	Label  *descriptorpb.FieldDescriptorProto_Label
}

var fields = table.NewSchema(table.Def[fieldKey, *descriptorpb.FieldDescriptorProto]{
	Name: "fields",
	Key:  []string{"name", "number descending", "label"},
	KeyOf: func(r *descriptorpb.FieldDescriptorProto) fieldKey {
		return fieldKey{r.Name, r.Number, r.Label}
	},
	Fields: func(k *fieldKey, c *table.Codec) {
		table.OptionalString(c, &k.Name, keyenc.Ascending)
		table.OptionalInt(c, &k.Number, keyenc.Descending)
		table.OptionalInt(c, &k.Label, keyenc.Ascending)
	},
})

// instantKey is the key of instants: a table of Timestamps (proto3: no
// field has presence) keyed by (seconds, nanos descending).
type instantKey struct {
	Seconds int64
	Nanos   int32
}

var instants = table.NewSchema(table.Def[instantKey, *timestamppb.Timestamp]{
	Name: "instants",
	Key:  []string{"seconds", "nanos descending"},
	KeyOf: func(r *timestamppb.Timestamp) instantKey {
		return instantKey{r.GetSeconds(), r.GetNanos()}
	},
	Fields: func(k *instantKey, c *table.Codec) {
		table.Int(c, &k.Seconds, keyenc.Ascending)
		table.Int(c, &k.Nanos, keyenc.Descending)
	},
	Restore: func(k *instantKey, r *timestamppb.Timestamp) {
		r.Seconds = k.Seconds
		r.Nanos = k.Nanos
	},
	Elided: []protowire.Number{1, 2},
})

func names(rows []*descriptorpb.FieldDescriptorProto) []string {
	var out []string
	for _, r := range rows {
		var s = "unset"
		if r.Name != nil {
			s = *r.Name
		}
		if r.Number != nil {
			s += "/" + string(rune('0'+*r.Number))
		}
		out = append(out, s)
	}
	return out
}

func collect[R any](rows *[]R) func(R) bool {
	return func(r R) bool { *rows = append(*rows, r); return true }
}

// A key field not set is a key of its own, distinct from the field's zero
// value, and ordered before every value in either direction.
func TestAbsentKeyFields(t *testing.T) {
	var kv = memKV{}
	var tbl = fields.Open(kv)
	var rows = []*descriptorpb.FieldDescriptorProto{
		{Name: proto.String("a"), Number: proto.Int32(1)},
		{Name: proto.String("a"), Number: proto.Int32(0)},
		{Name: proto.String("a")},
		{Name: proto.String("")},
		{},
		{Name: proto.String("b"), Number: proto.Int32(2), Label: descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum(), JsonName: proto.String("b")},
	}
	for _, r := range rows {
		if err := tbl.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	if len(kv) != len(rows) {
		t.Fatalf("%d rows stored, want %d: unset and zero key fields share a key", len(kv), len(rows))
	}
	for _, want := range rows {
		var got, ok, err = tbl.Get(tbl.KeyOf(want))
		if err != nil || !ok || !proto.Equal(got, want) {
			t.Errorf("Get(%v) = %v, %v, %v; want %v", tbl.KeyOf(want), got, ok, err, want)
		}
	}
	var all []*descriptorpb.FieldDescriptorProto
	if err := tbl.Scan(collect(&all)); err != nil {
		t.Fatal(err)
	}
	// Unset first, then by value; numbers descending, unset first.
	if got, want := names(all), []string{"unset", "", "a", "a/1", "a/0", "b/2"}; !slices.Equal(got, want) {
		t.Errorf("Scan = %v, want %v", got, want)
	}
	all = nil
	if err := tbl.ScanPrefix(fieldKey{Name: proto.String("a")}, 1, collect(&all)); err != nil {
		t.Fatal(err)
	}
	if got, want := names(all), []string{"a", "a/1", "a/0"}; !slices.Equal(got, want) {
		t.Errorf("ScanPrefix(a) = %v, want %v", got, want)
	}
	all = nil
	if err := tbl.ScanPrefix(fieldKey{}, 1, collect(&all)); err != nil {
		t.Fatal(err)
	}
	if got, want := names(all), []string{"unset"}; !slices.Equal(got, want) {
		t.Errorf("ScanPrefix(unset) = %v, want %v", got, want)
	}
	all = nil
	if err := tbl.ScanRange(fieldKey{Name: proto.String("a")}, fieldKey{Name: proto.String("a"), Number: proto.Int32(0)}, collect(&all)); err != nil {
		t.Fatal(err)
	}
	if got, want := names(all), []string{"a", "a/1"}; !slices.Equal(got, want) {
		t.Errorf("ScanRange = %v, want %v", got, want)
	}
	if err := tbl.Delete(fieldKey{}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := tbl.Get(fieldKey{}); ok {
		t.Error("Get found a deleted row")
	}
	if _, ok, _ := tbl.Get(fieldKey{Name: proto.String("")}); !ok {
		t.Error("deleting the row of an unset name deleted that of an empty one")
	}
	for _, n := range []int{-1, 4} {
		if err := tbl.ScanPrefix(fieldKey{}, n, collect(&all)); err == nil || !strings.Contains(err.Error(), "not within [0, 3]") {
			t.Errorf("ScanPrefix of %d fields: %v", n, err)
		}
	}
}

// Values leave out the key fields without presence, which reads restore.
func TestElidedKeyFields(t *testing.T) {
	var kv = memKV{}
	var tbl = instants.Open(kv)
	var rows = []*timestamppb.Timestamp{{Seconds: 2, Nanos: 1}, {Seconds: 2, Nanos: 5}, {Seconds: -1}, {}}
	for _, r := range rows {
		if err := tbl.Put(r); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range kv {
		if len(v) != 0 {
			t.Errorf("value of key %x is %x, not empty: every field is in the key", k, v)
		}
	}
	var all []*timestamppb.Timestamp
	if err := tbl.Scan(collect(&all)); err != nil {
		t.Fatal(err)
	}
	var want = []*timestamppb.Timestamp{{Seconds: -1}, {}, {Seconds: 2, Nanos: 5}, {Seconds: 2, Nanos: 1}}
	if len(all) != len(want) {
		t.Fatalf("scanned %v, want %v", all, want)
	}
	for i := range want {
		if !proto.Equal(all[i], want[i]) {
			t.Errorf("row %d scanned is %v, want %v", i, all[i], want[i])
		}
	}
	var got, ok, err = tbl.Get(instantKey{2, 5})
	if err != nil || !ok || !proto.Equal(got, rows[1]) {
		t.Errorf("Get = %v, %v, %v", got, ok, err)
	}
	// A stored key that doesn't decode fails the scan, naming the field.
	kv[string(append(keyenc.AppendString(nil, "instants", keyenc.Ascending), 0x12))] = nil
	if err := tbl.Scan(func(*timestamppb.Timestamp) bool { return true }); err == nil || !strings.Contains(err.Error(), "table instants: decoding key field seconds") {
		t.Errorf("scanning a corrupt key: %v", err)
	}
}

// failingKV fails every operation.
type failingKV struct{}

var errFailing = errors.New("failing")

func (failingKV) Get([]byte) ([]byte, bool, error)                 { return nil, false, errFailing }
func (failingKV) Put(_, _ []byte) error                            { return errFailing }
func (failingKV) Delete([]byte) error                              { return errFailing }
func (failingKV) Scan(_, _ []byte, _ func(k, v []byte) bool) error { return errFailing }

func TestErrorsAreWrapped(t *testing.T) {
	var tbl = instants.Open(failingKV{})
	var _, _, err = tbl.Get(instantKey{})
	for _, err := range []error{err, tbl.Put(&timestamppb.Timestamp{}), tbl.Delete(instantKey{}), tbl.Scan(nil)} {
		if !errors.Is(err, errFailing) || !strings.HasPrefix(err.Error(), "table instants: ") {
			t.Errorf("error %v does not wrap the KV's, after the table's name", err)
		}
	}
}

// value is one value of each key field function's type, with presence.
type value struct {
	S  *string
	B  []byte
	T  *bool
	I  *int32
	L  *int64
	U  *uint32
	W  *uint64
	TS *timestamppb.Timestamp
}

func (v *value) fields(c *table.Codec, d keyenc.Direction) {
	table.OptionalString(c, &v.S, d)
	table.OptionalBytes(c, &v.B, d)
	table.OptionalBool(c, &v.T, d)
	table.OptionalInt(c, &v.I, d)
	table.OptionalInt(c, &v.L, d)
	table.OptionalUint(c, &v.U, d)
	table.OptionalUint(c, &v.W, d)
	table.Timestamp(c, &v.TS, d)
}

// FuzzFields checks that every key field function decodes what it encodes,
// and that keys order as their fields do, an unset field first.
func FuzzFields(f *testing.F) {
	f.Add("a", []byte{0}, int64(-1), uint64(3), uint8(0), "b", []byte{}, int64(1), uint64(2), uint8(0xff), false)
	f.Add("", []byte(nil), int64(math.MinInt64), uint64(math.MaxUint64), uint8(0x0f), "", []byte(nil), int64(math.MaxInt64), uint64(0), uint8(0xf0), true)
	f.Fuzz(func(t *testing.T, s1 string, b1 []byte, i1 int64, u1 uint64, set1 uint8, s2 string, b2 []byte, i2 int64, u2 uint64, set2 uint8, desc bool) {
		var d = keyenc.Ascending
		if desc {
			d = keyenc.Descending
		}
		var build = func(s string, b []byte, i int64, u uint64, set uint8) value {
			var v value
			if set&1 != 0 {
				v.S = &s
			}
			if set&2 != 0 {
				v.B = append([]byte{}, b...)
			}
			if set&4 != 0 {
				v.T = proto.Bool(i%2 == 0)
			}
			if set&8 != 0 {
				v.I = proto.Int32(int32(i))
			}
			if set&16 != 0 {
				v.L = &i
			}
			if set&32 != 0 {
				v.U = proto.Uint32(uint32(u))
			}
			if set&64 != 0 {
				v.W = &u
			}
			if set&128 != 0 {
				v.TS = &timestamppb.Timestamp{Seconds: i, Nanos: int32(u % 1e9)}
			}
			return v
		}
		var a, b = build(s1, b1, i1, u1, set1), build(s2, b2, i2, u2, set2)
		var ea, eb = encodeValue(&a, d), encodeValue(&b, d)
		var got = decodeValue(t, ea, d)
		if !bytes.Equal(encodeValue(&got, d), ea) {
			t.Fatalf("%+v decodes to %+v", a, got)
		}
		// An unset field sorts first either way; values in the direction.
		var want = compareValues(a, b)
		if d == keyenc.Descending && !decidedByPresence(a, b) {
			want = -want
		}
		if c := cmp.Compare(bytes.Compare(ea, eb), 0); c != want {
			t.Fatalf("%s keys of %+v and %+v compare %d, want %d", d, a, b, c, want)
		}
	})
}

func encodeValue(v *value, d keyenc.Direction) []byte {
	var c = table.NewEncoder(nil, 8)
	v.fields(c, d)
	return c.Bytes()
}

func decodeValue(t *testing.T, b []byte, d keyenc.Direction) value {
	var v value
	var c = table.NewDecoder(b)
	v.fields(c, d)
	if err := c.Err(); err != nil {
		t.Fatalf("decoding %x: %v", b, err)
	}
	return v
}

// presence compares the presence of two fields: -1 if only a is not set.
func presence(aNil, bNil bool) int {
	switch {
	case aNil == bNil:
		return 0
	case aNil:
		return -1
	}
	return 1
}

// fieldOrders returns, for each field, its comparison by presence, and by
// value if both are set.
func fieldOrders(a, b value) (byPresence, byValue []int) {
	var add = func(aNil, bNil bool, c func() int) {
		var p = presence(aNil, bNil)
		byPresence = append(byPresence, p)
		if p == 0 && !aNil {
			byValue = append(byValue, c())
		} else {
			byValue = append(byValue, 0)
		}
	}
	add(a.S == nil, b.S == nil, func() int { return strings.Compare(*a.S, *b.S) })
	add(a.B == nil, b.B == nil, func() int { return bytes.Compare(a.B, b.B) })
	add(a.T == nil, b.T == nil, func() int { return cmp.Compare(btoi(*a.T), btoi(*b.T)) })
	add(a.I == nil, b.I == nil, func() int { return cmp.Compare(*a.I, *b.I) })
	add(a.L == nil, b.L == nil, func() int { return cmp.Compare(*a.L, *b.L) })
	add(a.U == nil, b.U == nil, func() int { return cmp.Compare(*a.U, *b.U) })
	add(a.W == nil, b.W == nil, func() int { return cmp.Compare(*a.W, *b.W) })
	add(a.TS == nil, b.TS == nil, func() int {
		return cmp.Or(cmp.Compare(a.TS.Seconds, b.TS.Seconds), cmp.Compare(a.TS.Nanos, b.TS.Nanos))
	})
	return byPresence, byValue
}

// compareValues compares a and b field by field, an unset field first.
func compareValues(a, b value) int {
	var byPresence, byValue = fieldOrders(a, b)
	for i := range byPresence {
		if c := cmp.Or(byPresence[i], byValue[i]); c != 0 {
			return c
		}
	}
	return 0
}

// decidedByPresence reports whether the first field in which a and b
// differ is set in one only.
func decidedByPresence(a, b value) bool {
	var byPresence, byValue = fieldOrders(a, b)
	for i := range byPresence {
		if byPresence[i] != 0 {
			return true
		} else if byValue[i] != 0 {
			return false
		}
	}
	return false
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
