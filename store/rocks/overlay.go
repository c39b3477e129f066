package rocks

import (
	"bytes"
	"encoding/binary"

	"github.com/google/btree"
)

// overlay holds the writes of one transaction, ordered by key, until they
// are written to the database in one batch. RocksDB's own indexed batch
// (WriteBatchWithIndex) decodes a record of its batch on every comparison
// of its index, and costs some microseconds per Put; the overlay is an
// in-memory B-tree, and its batch is encoded once, at commit.
//
// An overlay is written by the shard's goroutine until its transaction
// commits; after that it is only read, possibly concurrently, which the
// B-tree allows.
type overlay struct {
	tree  *btree.BTreeG[entry]
	bytes int // Of the keys and values of the entries.
}

// entry is a key written by a transaction: its value, or its deletion.
type entry struct {
	key, value []byte
	deleted    bool
}

func entryLess(a, b entry) bool { return bytes.Compare(a.key, b.key) < 0 }

// overlayFreeList recycles the nodes of committed overlays.
var overlayFreeList = btree.NewFreeListG[entry](1024)

func newOverlay() *overlay {
	return &overlay{tree: btree.NewWithFreeListG(32, entryLess, overlayFreeList)}
}

// put records key as set to value, or as deleted. It copies both.
func (o *overlay) put(key, value []byte, deleted bool) {
	var b = make([]byte, len(key)+len(value))
	copy(b, key)
	copy(b[len(key):], value)
	var e = entry{key: b[:len(key):len(key)], value: b[len(key):], deleted: deleted}
	if old, ok := o.tree.ReplaceOrInsert(e); ok {
		o.bytes -= len(old.key) + len(old.value)
	}
	o.bytes += len(key) + len(value)
}

// get returns the entry of key, if the overlay has one.
func (o *overlay) get(key []byte) (entry, bool) {
	return o.tree.Get(entry{key: key})
}

// ascend calls fn with each entry in [start, end), in order, until fn
// returns false. A nil end means no upper bound.
func (o *overlay) ascend(start, end []byte, fn func(entry) bool) {
	if end == nil {
		o.tree.AscendGreaterOrEqual(entry{key: start}, fn)
	} else {
		o.tree.AscendRange(entry{key: start}, entry{key: end}, fn)
	}
}

// release returns the overlay's nodes to the free list.
func (o *overlay) release() { o.tree.Clear(true) }

// RocksDB's WriteBatch representation (db/write_batch.cc): a 12-byte header
// of a fixed64 sequence number (assigned by the database on write) and a
// fixed32 count of records, then records of a type tag and length-prefixed
// key (and value) for the default column family.
const (
	batchHeaderLen  = 12
	batchTagDelete  = 0x0 // kTypeDeletion.
	batchTagValue   = 0x1 // kTypeValue.
	maxVarint32Len  = 5
	batchRecordSlop = 1 + 2*maxVarint32Len
)

// appendBatch appends the representation of a WriteBatch holding the
// overlay's writes, in key order, and then the given extra Put.
func (o *overlay) appendBatch(b []byte, extraKey, extraValue []byte) []byte {
	var start = len(b)
	b = append(b, make([]byte, batchHeaderLen)...)
	var count uint32
	o.tree.Ascend(func(e entry) bool {
		b, count = appendRecord(b, e.key, e.value, e.deleted), count+1
		return true
	})
	if extraKey != nil {
		b, count = appendRecord(b, extraKey, extraValue, false), count+1
	}
	binary.LittleEndian.PutUint32(b[start+8:], count)
	return b
}

// batchLen bounds the length of the overlay's batch with an extra Put.
func (o *overlay) batchLen(extra int) int {
	return batchHeaderLen + o.bytes + (o.tree.Len()+1)*batchRecordSlop + extra
}

func appendRecord(b []byte, key, value []byte, deleted bool) []byte {
	if deleted {
		b = append(b, batchTagDelete)
		b = binary.AppendUvarint(b, uint64(len(key)))
		return append(b, key...)
	}
	b = append(b, batchTagValue)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(value)))
	return append(b, value...)
}
