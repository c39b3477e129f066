package table

import (
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/gazconsumer/gazconsumer/keyenc"
)

// Codec encodes the fields of a key into a store key, or decodes them from
// one. A Def's Fields function passes it each key field, in order, to the
// function of this package for the field's type, which appends the field's
// encoding to the store key or sets the field from the store key's next
// encoded value.
type Codec struct {
	b      []byte // The store key: appended to, or consumed.
	decode bool
	n      int   // Of an encoding: the fields to encode.
	field  int   // The index of the next field.
	err    error // Of a decoding: the first error.
	failed int   // The index of the field that failed.
}

// op is what a Codec does with a field.
type op int

const (
	skip op = iota
	encode
	decode
)

// next returns what c does with the next field: of an encoding, encode the
// first n fields and skip the others; of a decoding, decode each field until
// one fails, and skip those that follow.
func (c *Codec) next() op {
	var i = c.field
	c.field++
	switch {
	case c.decode && c.err == nil:
		return decode
	case !c.decode && i < c.n:
		return encode
	}
	return skip
}

// fail records err, of decoding the field last passed to c, if not nil.
func (c *Codec) fail(err error) {
	if err != nil {
		c.err, c.failed = err, c.field-1
	}
}

// optional encodes or decodes the field *p, of type T with presence: a nil
// *p is the field not set, encoded as absent.
func optional[T any](c *Codec, p **T, d keyenc.Direction,
	app func([]byte, T, keyenc.Direction) []byte, dec func([]byte, keyenc.Direction) ([]byte, T, error)) {
	switch c.next() {
	case encode:
		if *p == nil {
			c.b = keyenc.AppendAbsent(c.b)
		} else {
			c.b = app(c.b, **p, d)
		}
	case decode:
		if rest, ok := keyenc.DecodeAbsent(c.b); ok {
			c.b, *p = rest, nil
			return
		}
		var v = new(T)
		var err error
		c.b, *v, err = dec(c.b, d)
		*p = v
		c.fail(err)
	}
}

// String is the key field function of a string field.
func String(c *Codec, p *string, d keyenc.Direction) {
	switch c.next() {
	case encode:
		c.b = keyenc.AppendString(c.b, *p, d)
	case decode:
		var err error
		c.b, *p, err = keyenc.DecodeString(c.b, d)
		c.fail(err)
	}
}

// OptionalString is the key field function of a string field with presence.
func OptionalString(c *Codec, p **string, d keyenc.Direction) {
	optional(c, p, d, keyenc.AppendString, keyenc.DecodeString)
}

// Bytes is the key field function of a bytes field. A decoded field never
// aliases the store key.
func Bytes(c *Codec, p *[]byte, d keyenc.Direction) {
	switch c.next() {
	case encode:
		c.b = keyenc.AppendBytes(c.b, *p, d)
	case decode:
		var err error
		c.b, *p, err = keyenc.DecodeBytes(c.b, d)
		c.fail(err)
	}
}

// OptionalBytes is the key field function of a bytes field with presence,
// which is not set if nil (as protoc-gen-go represents one).
func OptionalBytes(c *Codec, p *[]byte, d keyenc.Direction) {
	switch c.next() {
	case encode:
		if *p == nil {
			c.b = keyenc.AppendAbsent(c.b)
		} else {
			c.b = keyenc.AppendBytes(c.b, *p, d)
		}
	case decode:
		if rest, ok := keyenc.DecodeAbsent(c.b); ok {
			c.b, *p = rest, nil
			return
		}
		var err error
		c.b, *p, err = keyenc.DecodeBytes(c.b, d)
		c.fail(err)
	}
}

// Bool is the key field function of a bool field.
func Bool(c *Codec, p *bool, d keyenc.Direction) {
	switch c.next() {
	case encode:
		c.b = keyenc.AppendBool(c.b, *p, d)
	case decode:
		var err error
		c.b, *p, err = keyenc.DecodeBool(c.b, d)
		c.fail(err)
	}
}

// OptionalBool is the key field function of a bool field with presence.
func OptionalBool(c *Codec, p **bool, d keyenc.Direction) {
	optional(c, p, d, keyenc.AppendBool, keyenc.DecodeBool)
}

// Signed are the Go types of the signed integer and enum fields of keys.
type Signed interface{ ~int32 | ~int64 }

// Unsigned are the Go types of the unsigned integer fields of keys.
type Unsigned interface{ ~uint32 | ~uint64 }

// appendInt appends the encoding of v.
func appendInt[T Signed](b []byte, v T, d keyenc.Direction) []byte {
	return keyenc.AppendInt(b, int64(v), d)
}

// decodeInt decodes a T, failing if the decoded integer overflows it.
func decodeInt[T Signed](b []byte, d keyenc.Direction) ([]byte, T, error) {
	var rest, v, err = keyenc.DecodeInt(b, d)
	if err == nil && int64(T(v)) != v {
		return b, 0, fmt.Errorf("keyenc: decoding %s int: %d overflows %T", d, v, T(0))
	}
	return rest, T(v), err
}

// appendUint appends the encoding of v.
func appendUint[T Unsigned](b []byte, v T, d keyenc.Direction) []byte {
	return keyenc.AppendUint(b, uint64(v), d)
}

// decodeUint decodes a T, failing if the decoded integer overflows it.
func decodeUint[T Unsigned](b []byte, d keyenc.Direction) ([]byte, T, error) {
	var rest, v, err = keyenc.DecodeUint(b, d)
	if err == nil && uint64(T(v)) != v {
		return b, 0, fmt.Errorf("keyenc: decoding %s uint: %d overflows %T", d, v, T(0))
	}
	return rest, T(v), err
}

// Int is the key field function of a signed integer or enum field (an enum
// is keyed by its number).
func Int[T Signed](c *Codec, p *T, d keyenc.Direction) {
	switch c.next() {
	case encode:
		c.b = keyenc.AppendInt(c.b, int64(*p), d)
	case decode:
		var err error
		c.b, *p, err = decodeInt[T](c.b, d)
		c.fail(err)
	}
}

// OptionalInt is the key field function of a signed integer or enum field
// with presence.
func OptionalInt[T Signed](c *Codec, p **T, d keyenc.Direction) {
	optional(c, p, d, appendInt[T], decodeInt[T])
}

// Uint is the key field function of an unsigned integer field.
func Uint[T Unsigned](c *Codec, p *T, d keyenc.Direction) {
	switch c.next() {
	case encode:
		c.b = keyenc.AppendUint(c.b, uint64(*p), d)
	case decode:
		var err error
		c.b, *p, err = decodeUint[T](c.b, d)
		c.fail(err)
	}
}

// OptionalUint is the key field function of an unsigned integer field with
// presence.
func OptionalUint[T Unsigned](c *Codec, p **T, d keyenc.Direction) {
	optional(c, p, d, appendUint[T], decodeUint[T])
}

// Timestamp is the key field function of a google.protobuf.Timestamp field,
// which is not set if nil. Normalized timestamps order by the instant they
// denote. A decoded field is a new Timestamp.
func Timestamp(c *Codec, p **timestamppb.Timestamp, d keyenc.Direction) {
	switch c.next() {
	case encode:
		if *p == nil {
			c.b = keyenc.AppendAbsent(c.b)
		} else {
			c.b = keyenc.AppendTimestamp(c.b, (*p).GetSeconds(), (*p).GetNanos(), d)
		}
	case decode:
		if rest, ok := keyenc.DecodeAbsent(c.b); ok {
			c.b, *p = rest, nil
			return
		}
		var rest, s, n, err = keyenc.DecodeTimestamp(c.b, d)
		c.b, *p = rest, &timestamppb.Timestamp{Seconds: s, Nanos: n}
		c.fail(err)
	}
}

// Present returns a pointer to v if has, else nil: the key field of a
// message of the opaque API, of a field with presence (has is its Has
// method's).
func Present[T any](has bool, v T) *T {
	if !has {
		return nil
	}
	return &v
}

// PresentBytes returns v, not nil, if has, else nil: the key field of a
// message of the opaque API, of a bytes field with presence.
func PresentBytes(has bool, v []byte) []byte {
	switch {
	case !has:
		return nil
	case v == nil:
		return []byte{}
	}
	return v
}

// Value returns *p, or the zero T if p is nil: of the key field of a field
// with presence, the value a message's getter returns, which a partition
// key encodes (see Schema.Owned).
func Value[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
