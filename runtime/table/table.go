// Package table holds the typed tables of generated consumers: rows of one
// protobuf message type, kept in a shard's store (a runtime.KV) under the
// order-preserving encoding (package keyenc) of the table's name and of the
// row's key fields.
//
// A Table is what protoc-gen-gazconsumer's …Table types are: it holds
// everything that doesn't vary from one table to another. The generated code
// of a table is only what does: its key struct (…Key), and the Schema
// relating a key to its rows and to the bytes of a store key. A Schema's key
// function passes each key field, in order, to the function of this package
// for the field's type (String, Int, Timestamp, Optional…): the same
// function both encodes keys and decodes them, so that the two can't
// disagree.
//
// A row is stored under the encoding of its table's name followed by its key
// fields; its value is the row's protobuf encoding without the key fields
// that have no presence, which reads set back from the key. A key field with
// presence (a proto3 optional field, a field of explicit presence in an
// edition, a google.protobuf.Timestamp) that is not set is encoded as
// keyenc.AppendAbsent: before every value of the field, in either direction,
// and distinct from its zero value.
package table

import (
	"bytes"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/gazconsumer/gazconsumer/keyenc"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/codec"
)

// Def defines a table to NewSchema: generated code declares one per table.
// K is the table's key struct and R a pointer to its row message.
type Def[K any, R proto.Message] struct {
	// Name of the table in its store.
	Name string
	// Key names the key fields, in order, as written in the .proto file,
	// with " descending" after those ordered from largest to smallest.
	Key []string
	// KeyOf returns the key of a row.
	KeyOf func(R) K
	// Fields passes each field of the key, in the order of Key, to the
	// function of this package for its type, which encodes or decodes it
	// through c.
	Fields func(k *K, c *Codec)
	// Restore sets the key fields of a row which its stored value leaves
	// out (Elided) from its key. It must not make the row alias the key.
	// Nil if Elided is empty.
	Restore func(k *K, row R)
	// Elided are the numbers of the key fields which a stored value leaves
	// out: those without presence.
	Elided []protowire.Number
	// TTL, if positive, is how long a row lives after its last write: the
	// table's `ttl` annotation (see Expires).
	TTL time.Duration
}

// Schema is a table's Def, ready to open the table in stores.
type Schema[K any, R proto.Message] struct {
	def    Def[K, R]
	prefix []byte   // The encoding of the table's name, which begins every key.
	end    []byte   // The first key after those beginning with prefix.
	newRow func() R // Returns an empty row.
	errs   string   // Begins the errors of the table.
}

// NewSchema returns the schema of def, whose rows are messages of type M.
func NewSchema[K any, M any, R interface {
	*M
	proto.Message
}](def Def[K, R]) *Schema[K, R] {
	var prefix = keyenc.AppendString(nil, def.Name, keyenc.Ascending)
	return &Schema[K, R]{
		def:    def,
		prefix: prefix,
		end:    keyenc.PrefixEnd(prefix),
		newRow: func() R { return R(new(M)) },
		errs:   "table " + def.Name + ": ",
	}
}

// Name returns the table's name in its store.
func (s *Schema[K, R]) Name() string { return s.def.Name }

// KeyFields returns the number of the table's key fields.
func (s *Schema[K, R]) KeyFields() int { return len(s.def.Key) }

// KeyOf returns the key of row.
func (s *Schema[K, R]) KeyOf(row R) K { return s.def.KeyOf(row) }

// Span returns the store keys [start, end) of the table's rows.
func (s *Schema[K, R]) Span() (start, end []byte) { return s.prefix, s.end }

// AppendKey appends to b the store key of the first fields key fields of
// key (all of them, for a row's key; fewer, for a prefix of keys). It may
// be called concurrently.
func (s *Schema[K, R]) AppendKey(b []byte, key K, fields int) []byte {
	b = append(b, s.prefix...)
	var c = Codec{b: b, n: fields}
	s.def.Fields(&key, &c)
	return c.b
}

// Prefetch adds to p the store key of the row of key, for its store to read
// ahead (see runtime.ReadsAhead).
func (s *Schema[K, R]) Prefetch(p *runtime.Prefetch, key K) {
	var sc = p.Scratch(s, newScratch[K]).(*scratch[K])
	sc.key = key
	sc.c = Codec{b: append(p.Append(), s.prefix...), n: len(s.def.Key)}
	s.def.Fields(&sc.key, &sc.c)
	p.Add(sc.c.b)
}

// newScratch returns a new scratch of keys K, as an any.
func newScratch[K any]() any { return new(scratch[K]) }

// Row decodes the row stored under key with value, which it does not
// retain. It may be called concurrently.
func (s *Schema[K, R]) Row(key, value []byte) (R, error) {
	var zero R
	var row = s.newRow()
	if err := codec.UnmarshalNew(value, row); err != nil {
		return zero, fmt.Errorf("%sdecoding row of key %x: %w", s.errs, key, err)
	}
	if s.def.Restore == nil {
		return row, nil
	}
	var k, err = s.decodeKey(key)
	if err != nil {
		return zero, fmt.Errorf("%s%w", s.errs, err)
	}
	s.def.Restore(&k, row)
	return row, nil
}

// decodeKey decodes the store key b.
func (s *Schema[K, R]) decodeKey(b []byte) (K, error) {
	var k K
	if !bytes.HasPrefix(b, s.prefix) {
		return k, fmt.Errorf("key %x is not of the table", b)
	}
	var c = Codec{b: b[len(s.prefix):], decode: true}
	s.def.Fields(&k, &c)
	if c.err != nil {
		return k, fmt.Errorf("decoding key field %s of %x: %w", s.def.Key[c.failed], b, c.err)
	} else if len(c.b) != 0 {
		return k, fmt.Errorf("decoding key %x: %w", b, keyenc.ErrTrailing)
	}
	return k, nil
}

// Owned returns the ownership of the table's rows in a rescaled consumer:
// partitionKey appends to b the partition key of the row of key k, encoded
// as the consumer's journal messages encode theirs.
func (s *Schema[K, R]) Owned(partitionKey func(k *K, b []byte) []byte) runtime.TableOwnership {
	return runtime.TableOwnership{
		Name: s.def.Name, Start: s.prefix, End: s.end,
		PartitionKey: func(b, key []byte) ([]byte, error) {
			var k, err = s.decodeKey(key)
			if err != nil {
				return b, fmt.Errorf("%s%w", s.errs, err)
			}
			return partitionKey(&k, b), nil
		},
	}
}

// Unowned returns the ownership of a table whose rows have no partition
// key, for the reason why, which names the table's declaration.
func (s *Schema[K, R]) Unowned(why string) runtime.TableOwnership {
	return runtime.TableOwnership{Name: s.def.Name, Start: s.prefix, End: s.end, Unowned: why}
}

// Open returns the table of the schema in the store view kv.
func (s *Schema[K, R]) Open(kv runtime.KV) Table[K, R] {
	return Table[K, R]{kv: kv, s: s, sc: new(scratch[K])}
}

// Table is a table of a store, typed: rows R ordered by their keys K. Its
// reads see the writes of the store's current transaction. A Table is used
// by one goroutine at a time.
type Table[K any, R proto.Message] struct {
	kv runtime.KV
	s  *Schema[K, R]
	sc *scratch[K]
}

// scratch holds what the point operations of a table reuse, so that they
// don't allocate: KV does not retain the keys and values passed to it.
type scratch[K any] struct {
	buf []byte // A value, then a key.
	key K      // The key being encoded or decoded.
	c   Codec
}

// KeyOf returns the key of row.
func (t Table[K, R]) KeyOf(row R) K { return t.s.def.KeyOf(row) }

// Schema returns the schema of the table.
func (t Table[K, R]) Schema() *Schema[K, R] { return t.s }

// Get returns the row having key, and whether there is one.
func (t Table[K, R]) Get(key K) (R, bool, error) {
	var zero R
	var k = t.encode(t.sc.buf[:0], key, len(t.s.def.Key))
	t.sc.buf = k
	var v, found, err = t.kv.Get(k)
	if err != nil {
		return zero, false, fmt.Errorf("%sgetting %v: %w", t.s.errs, key, err)
	} else if !found {
		return zero, false, nil
	}
	var row = t.s.newRow()
	if err = codec.UnmarshalNew(v, row); err != nil {
		return zero, false, fmt.Errorf("%sdecoding row %v: %w", t.s.errs, key, err)
	}
	if t.s.def.Restore != nil {
		t.sc.key = key
		t.s.def.Restore(&t.sc.key, row)
	}
	return row, true, nil
}

// Put stores row under the key of its key fields, replacing any row there.
func (t Table[K, R]) Put(row R) error {
	// The value, then the key, in the scratch buffer.
	var b, err = codec.Append(t.sc.buf[:0], row)
	if err != nil {
		return fmt.Errorf("%sencoding row: %w", t.s.errs, err)
	}
	if len(t.s.def.Elided) != 0 {
		if b, err = codec.StripFields(b, t.s.def.Elided...); err != nil {
			return fmt.Errorf("%sencoding row: %w", t.s.errs, err)
		}
	}
	var nv = len(b)
	var key = t.s.def.KeyOf(row)
	b = t.encode(b, key, len(t.s.def.Key))
	t.sc.buf = b
	if err = t.kv.Put(b[nv:], b[:nv]); err != nil {
		return fmt.Errorf("%sputting %v: %w", t.s.errs, key, err)
	}
	if t.s.def.TTL > 0 {
		if err = t.touch(b[nv:], true); err != nil {
			return fmt.Errorf("%sputting %v: %w", t.s.errs, key, err)
		}
	}
	return nil
}

// Delete removes the row having key, if there is one.
func (t Table[K, R]) Delete(key K) error {
	var k = t.encode(t.sc.buf[:0], key, len(t.s.def.Key))
	t.sc.buf = k
	if err := t.kv.Delete(k); err != nil {
		return fmt.Errorf("%sdeleting %v: %w", t.s.errs, key, err)
	}
	if t.s.def.TTL > 0 {
		if err := t.touch(k, false); err != nil {
			return fmt.Errorf("%sdeleting %v: %w", t.s.errs, key, err)
		}
	}
	return nil
}

// Scan calls fn with every row of the table in key order, until fn returns
// false. fn may read the table, but not write it.
func (t Table[K, R]) Scan(fn func(R) bool) error {
	return t.scan(t.s.prefix, t.s.end, fn)
}

// ScanPrefix calls fn, in key order until it returns false, with every row
// whose first `fields` key fields equal those of key. fn may read the
// table, but not write it.
func (t Table[K, R]) ScanPrefix(key K, fields int, fn func(R) bool) error {
	if n := len(t.s.def.Key); fields < 0 || fields > n {
		return fmt.Errorf("%sscanning a prefix of %d key fields, not within [0, %d]", t.s.errs, fields, n)
	}
	var p = t.encode(nil, key, fields)
	return t.scan(p, keyenc.PrefixEnd(p), fn)
}

// ScanRange calls fn, in key order until it returns false, with every row
// whose key is within [from, to). fn may read the table, but not write it.
func (t Table[K, R]) ScanRange(from, to K, fn func(R) bool) error {
	var n = len(t.s.def.Key)
	return t.scan(t.encode(nil, from, n), t.encode(nil, to, n), fn)
}

// encode appends to b the store key of the first n fields of key.
func (t Table[K, R]) encode(b []byte, key K, n int) []byte {
	b = append(b, t.s.prefix...)
	t.sc.key = key
	t.sc.c = Codec{b: b, n: n}
	t.s.def.Fields(&t.sc.key, &t.sc.c)
	return t.sc.c.b
}

// scan calls fn with the rows of the store keys within [start, end).
func (t Table[K, R]) scan(start, end []byte, fn func(R) bool) error {
	var derr error
	var err = t.kv.Scan(start, end, func(k, v []byte) bool {
		var row = t.s.newRow()
		if derr = codec.UnmarshalNew(v, row); derr != nil {
			derr = fmt.Errorf("decoding row of key %x: %w", k, derr)
			return false
		}
		if t.s.def.Restore != nil {
			if derr = t.decode(k); derr != nil {
				return false
			}
			t.s.def.Restore(&t.sc.key, row)
		}
		return fn(row)
	})
	if err != nil {
		return fmt.Errorf("%sscanning: %w", t.s.errs, err)
	} else if derr != nil {
		return fmt.Errorf("%s%w", t.s.errs, derr)
	}
	return nil
}

// decode decodes the store key b into the scratch key.
func (t Table[K, R]) decode(b []byte) error {
	var err error
	t.sc.key, err = t.s.decodeKey(b)
	return err
}
