package codec

import (
	"bytes"
	"errors"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// vtString is a StringValue with hand-written methods of
// protoc-gen-go-vtproto's shape, which count their calls.
type vtString struct {
	*wrapperspb.StringValue
	calls int
}

func (m *vtString) SizeVT() int {
	m.calls++
	if m.Value == "" {
		return 0
	}
	return protowire.SizeTag(1) + protowire.SizeBytes(len(m.Value))
}

func (m *vtString) MarshalToSizedBufferVT(b []byte) (int, error) {
	m.calls++
	var out []byte
	if m.Value != "" {
		out = protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), m.Value)
	}
	if len(out) != len(b) {
		return 0, errors.New("buffer is not SizeVT bytes")
	}
	return copy(b, out), nil
}

func (m *vtString) UnmarshalVT(b []byte) error {
	m.calls++
	for len(b) != 0 {
		var num, typ, n = protowire.ConsumeTag(b)
		if n < 0 || num != 1 || typ != protowire.BytesType {
			return errors.New("bad tag")
		}
		var v, vn = protowire.ConsumeString(b[n:])
		if vn < 0 {
			return errors.New("bad string")
		}
		m.Value += v // Merges, as vtproto's does: Unmarshal must reset first.
		b = b[n+vn:]
	}
	return nil
}

func TestVTMethodsAreUsed(t *testing.T) {
	if noVTProto {
		t.Skip("built with gazconsumer_novtproto, which ignores vtproto's methods")
	}
	var m = &vtString{StringValue: wrapperspb.String("hello")}
	var want, _ = proto.Marshal(m.StringValue)
	if got := Size(m); got != len(want) {
		t.Fatalf("Size = %d, want %d", got, len(want))
	}
	var got, err = Append([]byte("prefix"), m)
	if err != nil || !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("Append = %q, %v; want prefix%q", got, err, want)
	}
	var into = &vtString{StringValue: wrapperspb.String("old")}
	if err = Unmarshal(want, into); err != nil || into.Value != "hello" {
		t.Fatalf("Unmarshal: %q, %v", into.Value, err)
	}
	if m.calls != 3 || into.calls != 1 {
		t.Fatalf("vtproto methods called %d and %d times, want 3 and 1", m.calls, into.calls)
	}
}

func TestProtoFallback(t *testing.T) {
	var m = wrapperspb.String("hello")
	var want, _ = proto.Marshal(m)
	if got, err := Append(nil, m); err != nil || !bytes.Equal(got, want) || Size(m) != len(want) {
		t.Fatalf("Append = %q, %v; Size %d; want %q", got, err, Size(m), want)
	}
	var into = wrapperspb.String("old")
	if err := Unmarshal(want, into); err != nil || into.Value != "hello" {
		t.Fatalf("Unmarshal: %q, %v", into.Value, err)
	}
	if err := Unmarshal([]byte{0xff}, into); err == nil {
		t.Fatal("Unmarshal of a bad encoding succeeded")
	}
}

// FuzzCodecsAgree checks that the vtproto path and protobuf's encode alike,
// and decode each other's encodings to equal messages.
func FuzzCodecsAgree(f *testing.F) {
	f.Add("", []byte{})
	f.Add("hello", []byte("cap"))
	f.Fuzz(func(t *testing.T, s string, prefix []byte) {
		if !utf8.ValidString(s) {
			t.Skip("protobuf refuses to encode invalid UTF-8; vtproto does not check")
		}
		var vt = &vtString{StringValue: wrapperspb.String(s)}
		var viaVT, err = Append(bytes.Clone(prefix), vt)
		if err != nil {
			t.Fatal(err)
		}
		viaProto, err := Append(bytes.Clone(prefix), vt.StringValue)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(viaVT, viaProto) {
			t.Fatalf("encodings differ: %x and %x", viaVT, viaProto)
		}
		var a, b = &vtString{StringValue: wrapperspb.String("x")}, wrapperspb.String("y")
		var errA, errB = Unmarshal(viaVT[len(prefix):], a), Unmarshal(viaProto[len(prefix):], b)
		if (errA == nil) != (errB == nil) || (errA == nil && a.Value != b.Value) {
			t.Fatalf("decodings differ: %q %v and %q %v", a.Value, errA, b.Value, errB)
		}
		// Into new messages, without a reset, both decode alike too.
		var c, d = &vtString{StringValue: new(wrapperspb.StringValue)}, new(wrapperspb.StringValue)
		var errC, errD = UnmarshalNew(viaVT[len(prefix):], c), UnmarshalNew(viaProto[len(prefix):], d)
		if (errC == nil) != (errA == nil) || (errD == nil) != (errB == nil) || (errC == nil && c.Value != a.Value) || (errD == nil && d.Value != b.Value) {
			t.Fatalf("decodings into new messages differ: %q %v and %q %v", c.Value, errC, d.Value, errD)
		}
	})
}

// FuzzStripFields checks that stripping fields from an encoding is the
// encoding of the message without them.
func FuzzStripFields(f *testing.F) {
	f.Add("name", int32(3), "type", "json", uint8(0b101))
	f.Add("", int32(-1), "", "x", uint8(0xff))
	f.Fuzz(func(t *testing.T, name string, number int32, typeName, jsonName string, strip uint8) {
		if !utf8.ValidString(name) || !utf8.ValidString(typeName) || !utf8.ValidString(jsonName) {
			t.Skip()
		}
		var m = &descriptorpb.FieldDescriptorProto{Name: &name, Number: &number, TypeName: &typeName, JsonName: &jsonName}
		var fields = []struct {
			num   protowire.Number
			clear func(*descriptorpb.FieldDescriptorProto)
		}{
			{1, func(m *descriptorpb.FieldDescriptorProto) { m.Name = nil }},
			{3, func(m *descriptorpb.FieldDescriptorProto) { m.Number = nil }},
			{6, func(m *descriptorpb.FieldDescriptorProto) { m.TypeName = nil }},
			{10, func(m *descriptorpb.FieldDescriptorProto) { m.JsonName = nil }},
		}
		var want = proto.Clone(m).(*descriptorpb.FieldDescriptorProto)
		var nums []protowire.Number
		for i, f := range fields {
			if strip&(1<<i) != 0 {
				nums = append(nums, f.num)
				f.clear(want)
			}
		}
		var b, _ = proto.Marshal(m)
		var wantB, _ = proto.Marshal(want)
		var got, err = StripFields(b, nums...)
		if err != nil || !bytes.Equal(got, wantB) {
			t.Fatalf("StripFields(%x, %v) = %x, %v; want %x", b, nums, got, err, wantB)
		}
	})
}

func TestStripFieldsOfBadEncoding(t *testing.T) {
	if _, err := StripFields([]byte{0x0a, 0x05, 'a'}, 1); err == nil {
		t.Fatal("stripped a truncated field")
	}
}

// FuzzShortField checks that the fields shortField decodes, it decodes as
// protowire does, whatever the bytes.
func FuzzShortField(f *testing.F) {
	f.Add([]byte{0x0a, 0x03, 'a', 'b', 'c'})
	f.Add([]byte{0x08, 0x96, 0x01})
	f.Add([]byte{0x0d, 1, 2, 3, 4})
	f.Add([]byte{0x11, 1, 2, 3, 4, 5, 6, 7, 8})
	f.Add([]byte{0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		var num, n, m = shortField(b)
		if m == 0 {
			return
		}
		var wnum, typ, wn = protowire.ConsumeTag(b)
		if wn < 0 {
			t.Fatalf("shortField(%x) = %d, %d, %d; protowire rejects the tag: %v", b, num, n, m, protowire.ParseError(wn))
		}
		var wm = protowire.ConsumeFieldValue(wnum, typ, b[wn:])
		if num != wnum || n != wn || m != wm {
			t.Fatalf("shortField(%x) = %d, %d, %d; protowire decodes %d, %d, %d", b, num, n, m, wnum, wn, wm)
		}
	})
}
