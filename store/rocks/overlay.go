package rocks

import (
	"bytes"
	"encoding/binary"
	"unsafe"

	"github.com/google/btree"
)

// overlay holds the writes of one transaction until they are written to
// the database in one batch. RocksDB's own indexed batch
// (WriteBatchWithIndex) decodes a record of its batch on every comparison
// of its index, and costs some microseconds per Put. An overlay keeps its
// entries in chunks that never move, a map of them by key, for Puts and
// Gets, and an ordered index of them (a B-tree), for scans and the batch: an
// entry enters the index once, when the overlay is next read in order,
// however often it's rewritten.
//
// An overlay is written by the shard's goroutine until its transaction
// commits, when freeze brings its index up to date; after that it is only
// read, possibly concurrently.
type overlay struct {
	rows    map[string]*entry
	chunks  [][]entry             // The entries, in the order their keys were first written.
	index   *btree.BTreeG[*entry] // Entries in key order, but the last unindexed.
	entries int                   // Count of entries in chunks.
	indexed int                   // Count of the first entries of chunks in index.
	bytes   int                   // Of the keys and values of the entries.
}

// entry is a key written by a transaction: its value, or its deletion.
type entry struct {
	key, value []byte
	deleted    bool
}

// entryChunk is how many entries a chunk of an overlay holds. Chunks never
// grow, so entries never move and the map and index can point to them.
const entryChunk = 256

// overlayFreeList recycles the index nodes of committed overlays.
var overlayFreeList = btree.NewFreeListG[*entry](1024)

func entryLess(a, b *entry) bool { return bytes.Compare(a.key, b.key) < 0 }

func newOverlay() *overlay {
	return &overlay{
		rows:  make(map[string]*entry),
		index: btree.NewWithFreeListG(32, entryLess, overlayFreeList),
	}
}

// put records key as set to value, or as deleted. It copies both.
func (o *overlay) put(key, value []byte, deleted bool) {
	if e := o.rows[string(key)]; e != nil {
		// Rewritten: the entry keeps its key, and its place in the index.
		o.bytes += len(value) - len(e.value)
		e.value, e.deleted = append([]byte(nil), value...), deleted
		return
	}
	var b = make([]byte, len(key)+len(value))
	copy(b, key)
	copy(b[len(key):], value)

	if n := len(o.chunks); n == 0 || len(o.chunks[n-1]) == entryChunk {
		o.chunks = append(o.chunks, make([]entry, 0, entryChunk))
	}
	var c = &o.chunks[len(o.chunks)-1]
	*c = append(*c, entry{key: b[:len(key):len(key)], value: b[len(key):], deleted: deleted})
	var e = &(*c)[len(*c)-1]
	// The entry's key is never modified: the map's key string shares it.
	o.rows[unsafe.String(unsafe.SliceData(e.key), len(e.key))] = e
	o.entries++
	o.bytes += len(key) + len(value)
}

// get returns the entry of key, if the overlay has one.
func (o *overlay) get(key []byte) (entry, bool) {
	if e := o.rows[string(key)]; e != nil {
		return *e, true
	}
	return entry{}, false
}

// len is the number of keys written.
func (o *overlay) len() int { return o.entries }

// each calls fn with every entry, in no particular order.
func (o *overlay) each(fn func(*entry)) {
	for _, c := range o.chunks {
		for i := range c {
			fn(&c[i])
		}
	}
}

// freeze brings the index up to date. The overlay is not written after.
func (o *overlay) freeze() {
	if o.indexed == o.entries {
		return // Up to date: don't write, as frozen overlays are read concurrently.
	}
	for i := o.indexed; i < o.entries; i++ {
		o.index.ReplaceOrInsert(&o.chunks[i/entryChunk][i%entryChunk])
	}
	o.indexed = o.entries
}

// ascend calls fn with each entry in [start, end), in order, until fn
// returns false. A nil end means no upper bound.
func (o *overlay) ascend(start, end []byte, fn func(entry) bool) {
	o.freeze()
	var visit = func(e *entry) bool { return fn(*e) }
	if end == nil {
		o.index.AscendGreaterOrEqual(&entry{key: start}, visit)
	} else {
		o.index.AscendRange(&entry{key: start}, &entry{key: end}, visit)
	}
}

// release returns the overlay's index nodes to the free list.
func (o *overlay) release() { o.index.Clear(true) }

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
	o.ascend(nil, nil, func(e entry) bool {
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
	return batchHeaderLen + o.bytes + (o.len()+1)*batchRecordSlop + extra
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
