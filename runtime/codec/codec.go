// Package codec encodes and decodes the protobuf messages of generated
// consumers: journal messages in Gazette's protobuf framing and the rows of
// tables.
//
// It uses the fastest codec a message offers. Messages with generated
// MarshalToSizedBufferVT, SizeVT and UnmarshalVT methods, as the generator
// of vtprotobuf (github.com/planetscale/vtprotobuf, features marshal,
// unmarshal and size) writes them, are encoded by those: protoc-gen-gazconsumer
// writes them by default (its option codecs), as does protoc-gen-go-vtproto.
// Other messages are encoded by google.golang.org/protobuf, through
// reflection, several times slower. The encodings are the same either way;
// vtprotobuf's decoder does not check that string fields hold valid UTF-8,
// as protobuf's does.
//
// Built with the tag gazconsumer_novtproto, the package ignores those
// methods and always uses google.golang.org/protobuf, as for messages
// generated without them: so that one build of a consumer can be measured
// as one generated with codecs=none (bench/ does).
package codec

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// vtMessage is implemented by messages with vtprotobuf's codecs.
type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
	UnmarshalVT([]byte) error
}

// asVT returns m's vtproto methods, if it has them and the build uses them.
func asVT(m proto.Message) (vtMessage, bool) {
	if noVTProto {
		return nil, false
	}
	var vt, ok = m.(vtMessage)
	return vt, ok
}

// Size returns the length of the encoding of m.
func Size(m proto.Message) int {
	if vt, ok := asVT(m); ok {
		return vt.SizeVT()
	}
	return proto.Size(m)
}

// Append appends the encoding of m to b.
func Append(b []byte, m proto.Message) ([]byte, error) {
	if vt, ok := asVT(m); ok {
		var n = vt.SizeVT()
		b = slices.Grow(b, n)
		var out = b[len(b) : len(b)+n]
		if _, err := vt.MarshalToSizedBufferVT(out); err != nil {
			return b, err
		}
		return b[:len(b)+n], nil
	}
	return proto.MarshalOptions{}.MarshalAppend(b, m)
}

// Unmarshal replaces m with the message encoded by b. M does not retain b.
func Unmarshal(b []byte, m proto.Message) error {
	if vt, ok := asVT(m); ok {
		proto.Reset(m) // UnmarshalVT merges into m.
		return vt.UnmarshalVT(b)
	}
	return proto.Unmarshal(b, m)
}

// UnmarshalNew decodes b into m, which must be zero-valued, as a message
// just made is: unlike Unmarshal, it doesn't reset m first (which costs as
// much as decoding a small message). M does not retain b.
func UnmarshalNew(b []byte, m proto.Message) error {
	if vt, ok := asVT(m); ok {
		return vt.UnmarshalVT(b)
	}
	return proto.UnmarshalOptions{Merge: true}.Unmarshal(b, m)
}

// StripFields removes from the encoding b every field numbered in nums, in
// place, and returns what remains. Generated tables store rows without
// their key fields, which the row's key holds already.
func StripFields(b []byte, nums ...protowire.Number) ([]byte, error) {
	var out = b[:0]
	for rest := b; len(rest) != 0; {
		var num, n, m = shortField(rest)
		if m == 0 {
			var typ protowire.Type
			if num, typ, n = protowire.ConsumeTag(rest); n < 0 {
				return nil, fmt.Errorf("stripping fields: %w", protowire.ParseError(n))
			}
			if m = protowire.ConsumeFieldValue(num, typ, rest[n:]); m < 0 {
				return nil, fmt.Errorf("stripping field %d: %w", num, protowire.ParseError(m))
			}
		}
		if !slices.Contains(nums, num) {
			out = append(out, rest[:n+m]...) // Never ahead of rest: copy is safe.
		}
		rest = rest[n+m:]
	}
	return out, nil
}

// shortField returns the number of the field b begins with, the length n of
// its tag and m of its value, if its tag is of one byte (fields 1 to 15)
// and its value a varint of up to 9 bytes, a fixed-size value or bytes of
// fewer than 128, which are most fields of a row: decoding them here costs
// a fraction of protowire's general calls. It returns m 0 for any other
// field, and for a malformed one, which protowire then decodes (or
// rejects).
func shortField(b []byte) (num protowire.Number, n, m int) {
	var t = b[0]
	if t < 1<<3 || t >= 0x80 {
		return 0, 0, 0
	}
	num, b = protowire.Number(t>>3), b[1:]
	switch protowire.Type(t & 7) {
	case protowire.VarintType:
		// Of up to 9 bytes: a 10th may overflow 64 bits.
		for i := 0; i < len(b) && i < 9; i++ {
			if b[i] < 0x80 {
				return num, 1, i + 1
			}
		}
	case protowire.Fixed32Type:
		if len(b) >= 4 {
			return num, 1, 4
		}
	case protowire.Fixed64Type:
		if len(b) >= 8 {
			return num, 1, 8
		}
	case protowire.BytesType:
		if len(b) != 0 && b[0] < 0x80 && 1+int(b[0]) <= len(b) {
			return num, 1, 1 + int(b[0])
		}
	}
	return 0, 0, 0
}
