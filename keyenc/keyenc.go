// Package keyenc encodes values into keys whose byte order is the order of
// the values: for two values a and b of one type and direction,
// bytes.Compare(Append(nil, a), Append(nil, b)) equals the comparison of a
// and b. Encodings are self-delimiting, so a composite key (a sequence of
// encoded values, each ascending or descending) also orders like its tuple
// of values compared element by element, and decodes back into them.
//
// The encodings are those of CockroachDB's key encoding, as vendored by
// github.com/jgraettinger/cockroach-encoding: integers are a variable-length
// big-endian form with a length tag, byte strings are escaped (0x00 becomes
// 0x00 0xFF) and terminated with 0x00 0x01, and descending values are the
// ones' complement of their ascending form. AppendAbsent encodes the absence
// of a value (a field with presence, not set) before every value, in either
// direction. Tables of generated consumers store rows under these keys, so
// the encoding is part of their on-disk format and must not change.
package keyenc

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/jgraettinger/cockroach-encoding/encoding"
)

// Direction is the order in which encoded values sort.
type Direction int

const (
	// Ascending sorts smaller values first.
	Ascending Direction = iota
	// Descending sorts larger values first.
	Descending
)

// String returns "ascending" or "descending".
func (d Direction) String() string {
	if d == Descending {
		return "descending"
	}
	return "ascending"
}

// ErrTrailing is returned by decoders of whole keys which find bytes left
// over after the last value.
var ErrTrailing = errors.New("keyenc: trailing bytes after key")

// errNonCanonical is returned when bytes decode to a value whose encoding
// they are not. The underlying decoders accept some tag bytes the encoders
// never produce; keys are only ever produced by the encoders, so such bytes
// are corrupt.
var errNonCanonical = errors.New("not a canonical encoding")

// canonical reports whether the bytes of b consumed by a decoder (all but
// rest) are exactly enc.
func canonical(b, rest, enc []byte) bool {
	return bytes.Equal(b[:len(b)-len(rest)], enc)
}

// AppendInt appends the encoding of v to b.
func AppendInt(b []byte, v int64, d Direction) []byte {
	if d == Descending {
		return encoding.EncodeVarintDescending(b, v)
	}
	return encoding.EncodeVarintAscending(b, v)
}

// DecodeInt decodes an int64 from the front of b, returning the rest of b.
func DecodeInt(b []byte, d Direction) (rest []byte, v int64, err error) {
	if d == Descending {
		rest, v, err = encoding.DecodeVarintDescending(b)
	} else {
		rest, v, err = encoding.DecodeVarintAscending(b)
	}
	if err == nil && !canonical(b, rest, AppendInt(make([]byte, 0, 9), v, d)) {
		err = errNonCanonical
	}
	if err != nil {
		return b, 0, fmt.Errorf("keyenc: decoding %s int: %w", d, err)
	}
	return rest, v, nil
}

// AppendUint appends the encoding of v to b.
func AppendUint(b []byte, v uint64, d Direction) []byte {
	if d == Descending {
		return encoding.EncodeUvarintDescending(b, v)
	}
	return encoding.EncodeUvarintAscending(b, v)
}

// DecodeUint decodes a uint64 from the front of b, returning the rest of b.
func DecodeUint(b []byte, d Direction) (rest []byte, v uint64, err error) {
	if d == Descending {
		rest, v, err = encoding.DecodeUvarintDescending(b)
	} else {
		rest, v, err = encoding.DecodeUvarintAscending(b)
	}
	if err == nil && !canonical(b, rest, AppendUint(make([]byte, 0, 9), v, d)) {
		err = errNonCanonical
	}
	if err != nil {
		return b, 0, fmt.Errorf("keyenc: decoding %s uint: %w", d, err)
	}
	return rest, v, nil
}

// AppendBool appends the encoding of v to b; false sorts before true.
func AppendBool(b []byte, v bool, d Direction) []byte {
	var u uint64
	if v {
		u = 1
	}
	return AppendUint(b, u, d)
}

// DecodeBool decodes a bool from the front of b, returning the rest of b.
func DecodeBool(b []byte, d Direction) (rest []byte, v bool, err error) {
	rest, u, err := DecodeUint(b, d)
	if err != nil {
		return b, false, err
	} else if u > 1 {
		return b, false, fmt.Errorf("keyenc: decoding %s bool: value %d is not 0 or 1", d, u)
	}
	return rest, u == 1, nil
}

// AppendBytes appends the encoding of v to b.
func AppendBytes(b []byte, v []byte, d Direction) []byte {
	if d == Descending {
		return encoding.EncodeBytesDescending(b, v)
	}
	return encoding.EncodeBytesAscending(b, v)
}

// DecodeBytes decodes a byte string from the front of b, returning the rest
// of b. The returned value never aliases b.
func DecodeBytes(b []byte, d Direction) (rest []byte, v []byte, err error) {
	return decodeBytes(b, d, []byte{})
}

// decodeBytes decodes a byte string from the front of b, appended to r,
// returning the rest of b. A nil r lets an ascending encoding without
// escapes be returned as a slice of b.
func decodeBytes(b []byte, d Direction, r []byte) (rest []byte, v []byte, err error) {
	if d == Descending {
		rest, v, err = encoding.DecodeBytesDescending(b, r)
	} else {
		rest, v, err = encoding.DecodeBytesAscending(b, r)
	}
	if err != nil {
		return b, nil, fmt.Errorf("keyenc: decoding %s bytes: %w", d, err)
	}
	return rest, v, nil
}

// AppendString appends the encoding of v to b. Strings order by their bytes.
func AppendString(b []byte, v string, d Direction) []byte {
	if d == Descending {
		return encoding.EncodeStringDescending(b, v)
	}
	return encoding.EncodeStringAscending(b, v)
}

// DecodeString decodes a string from the front of b, returning the rest of b.
func DecodeString(b []byte, d Direction) (rest []byte, v string, err error) {
	// Decoded as a slice of b (an ascending encoding without escapes) or
	// into buf, then copied once into the string.
	var buf [64]byte
	var r []byte
	if d == Descending {
		r = buf[:0] // Complemented in place: never b.
	}
	rest, s, err := decodeBytes(b, d, r)
	if err != nil {
		return b, "", err
	}
	return rest, string(s), nil
}

// AppendTimestamp appends the encoding of a google.protobuf.Timestamp, given
// as its seconds and nanos, to b. Normalized timestamps (nanos within
// [0, 1e9)) order by the instant they denote.
func AppendTimestamp(b []byte, seconds int64, nanos int32, d Direction) []byte {
	b = AppendInt(b, seconds, d)
	return AppendInt(b, int64(nanos), d)
}

// DecodeTimestamp decodes a Timestamp's seconds and nanos from the front of
// b, returning the rest of b.
func DecodeTimestamp(b []byte, d Direction) (rest []byte, seconds int64, nanos int32, err error) {
	rest, seconds, err = DecodeInt(b, d)
	if err != nil {
		return b, 0, 0, err
	}
	rest, n, err := DecodeInt(rest, d)
	if err != nil {
		return b, 0, 0, err
	} else if n < -1<<31 || n >= 1<<31 {
		return b, 0, 0, fmt.Errorf("keyenc: decoding %s timestamp: nanos %d overflow int32", d, n)
	}
	return rest, seconds, int32(n), nil
}

// absent is the encoding of an absent value: CockroachDB's encoding of NULL,
// below the first byte of every value's encoding in either direction (the
// tags of integers are 0x80 and above, the markers of byte strings 0x12 and
// 0x13).
const absent = 0x00

// AppendAbsent appends to b the encoding of an absent value: that of a
// field with presence which is not set. It sorts before the encoding of
// every value, in either direction, and no value's encoding begins with it,
// so that a key holding it is distinct from every key holding a value.
func AppendAbsent(b []byte) []byte {
	return append(b, absent)
}

// DecodeAbsent reports whether b begins with the encoding of an absent
// value and, if it does, returns the rest of b.
func DecodeAbsent(b []byte) (rest []byte, ok bool) {
	if len(b) != 0 && b[0] == absent {
		return b[1:], true
	}
	return b, false
}

// PrefixEnd returns the smallest key greater than every key having prefix
// p, for use as the exclusive end of a scan over the prefix. It returns nil,
// meaning no upper bound, if p is empty or all 0xFF. p is not modified.
func PrefixEnd(p []byte) []byte {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xFF {
			end := append([]byte(nil), p[:i+1]...)
			end[i]++
			return end
		}
	}
	return nil
}
