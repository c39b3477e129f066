// Package due is the index of what falls due in a shard's store at a time:
// rows of tables with a TTL that expire, and per-key timers. The runtime
// fires what falls due within a transaction, at the time of the shard's
// clock (processing time): a firing, its deletion from the index, and
// whatever its handler writes and publishes commit with the transaction's
// checkpoint, exactly once.
//
// The index is a run of keys of the store's KV under Prefix, each of the
// time it falls due (nanoseconds since the Unix epoch, as a big-endian
// number with its sign bit flipped, so that keys order by time), its Kind,
// and its subject: the store key of the row that expires, or of the timer.
// It holds no values. A row of a table with a TTL also has a record under
// ExpiryPrefix, of the time it expires, from which a write of the row finds
// its entry in the index to replace it.
package due

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"
)

// Prefixes of the index and of the expiry records. Their first byte, 0x01,
// begins no table's key (theirs begin with the encoding of a string), as
// runtime.PartitioningKey's.
const (
	Prefix       = "\x01gazconsumer/due/"
	ExpiryPrefix = "\x01gazconsumer/expiry/"
)

// Kind is what an entry of the index is due for.
type Kind byte

// Kinds of entries.
const (
	// Expiry of a row of a table with a TTL: the subject is its store key.
	Expiry Kind = 'e'
	// Timer firing: the subject is the timer's store key.
	Timer Kind = 't'
)

// String returns the kind's name.
func (k Kind) String() string {
	switch k {
	case Expiry:
		return "expiry"
	case Timer:
		return "timer"
	}
	return fmt.Sprintf("Kind(%d)", byte(k))
}

// timeLen is the length of the encoding of a time.
const timeLen = 8

// appendTime appends the encoding of t, which orders as t does.
func appendTime(b []byte, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(t.UnixNano())^(1<<63))
}

// decodeTime decodes the time encoded at the front of b.
func decodeTime(b []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(b)^(1<<63)))
}

// AppendKey appends to b the key of the index entry of subject, of kind,
// due at t.
func AppendKey(b []byte, t time.Time, kind Kind, subject []byte) []byte {
	b = append(b, Prefix...)
	b = appendTime(b, t)
	b = append(b, byte(kind))
	return append(b, subject...)
}

// ParseKey returns the time, kind and subject of an index key. The subject
// aliases key.
func ParseKey(key []byte) (t time.Time, kind Kind, subject []byte, err error) {
	if !bytes.HasPrefix(key, []byte(Prefix)) || len(key) < len(Prefix)+timeLen+1 {
		return t, 0, nil, fmt.Errorf("due: %q is not a key of the index", key)
	}
	var rest = key[len(Prefix):]
	t, kind = decodeTime(rest), Kind(rest[timeLen])
	if kind != Expiry && kind != Timer {
		return time.Time{}, 0, nil, fmt.Errorf("due: key %q is of unknown kind %d", key, byte(kind))
	}
	return t, kind, rest[timeLen+1:], nil
}

// Through returns the bounds of a scan of the index entries due at or
// before t.
func Through(t time.Time) (start, end []byte) {
	return []byte(Prefix), appendTime([]byte(Prefix), t.Add(time.Nanosecond))
}

// From returns the start of a scan of the index entries due at or after t.
func From(t time.Time) []byte { return appendTime([]byte(Prefix), t) }

// End returns the end of a scan of the whole index.
func End() []byte {
	var b = []byte(Prefix)
	b[len(b)-1]++
	return b
}

// AppendExpiryKey appends to b the key of the expiry record of the row of
// store key row.
func AppendExpiryKey(b []byte, row []byte) []byte {
	b = append(b, ExpiryPrefix...)
	return append(b, row...)
}

// AppendTime appends the value of an expiry record of time t.
func AppendTime(b []byte, t time.Time) []byte { return appendTime(b, t) }

// ParseTime returns the time of the value of an expiry record.
func ParseTime(v []byte) (time.Time, error) {
	if len(v) != timeLen {
		return time.Time{}, fmt.Errorf("due: an expiry record of %d bytes, not %d", len(v), timeLen)
	}
	return decodeTime(v), nil
}
