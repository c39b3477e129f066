package rocks

// #include "shim.h"
import "C"

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"github.com/gazconsumer/gazconsumer/store/txnkv"
)

// batchBuffer holds the representation of a store's WriteBatches in C
// memory, reused from one commit to the next: a commit's batch is built in
// place and written without another copy, and its memory (tens of MiB for a
// large transaction) is neither allocated again for each commit nor faulted
// in again page by page.
type batchBuffer struct {
	mu sync.Mutex
	c  unsafe.Pointer // The shim's buffer; nil once freed.
}

func newBatchBuffer() *batchBuffer { return &batchBuffer{c: C.gc_batch_new()} }

// capacity returns the bytes of C memory the buffer holds.
func (b *batchBuffer) capacity() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c == nil {
		return 0
	}
	return int(C.gc_batch_capacity(b.c))
}

// write builds a batch of at most n bytes with build, which appends its
// representation to the empty slice it is given (of capacity n), and writes
// it to cdb (a rocksdb_t) with cwo (a rocksdb_writeoptions_t).
func (b *batchBuffer) write(cdb, cwo unsafe.Pointer, n int, build func([]byte) []byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c == nil {
		return fmt.Errorf("write batch: the store is closed")
	}
	var cerr *C.char
	var p = C.gc_batch_reserve(b.c, C.size_t(n), &cerr)
	if p == nil {
		return fmt.Errorf("write batch of %d bytes: %w", n, cError(cerr))
	}
	var buf = unsafe.Slice((*byte)(unsafe.Pointer(p)), n)
	var rep = build(buf[:0])
	if len(rep) > n || (len(rep) != 0 && unsafe.SliceData(rep) != unsafe.SliceData(buf)) {
		// build outgrew its bound, and append moved it to Go memory.
		return fmt.Errorf("write batch of %d bytes outgrew its bound of %d", len(rep), n)
	}
	if msg := C.gc_batch_write(cdb, cwo, b.c, C.size_t(len(rep))); msg != nil {
		return cError(msg)
	}
	return nil
}

// free releases the buffer; a write then fails.
func (b *batchBuffer) free() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.c != nil {
		C.gc_batch_free(b.c)
		b.c = nil
	}
}

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

// appendBatch appends to b the representation of a WriteBatch holding the
// writes of o, in key order, and then the given extra Put.
func appendBatch(b []byte, o *txnkv.Overlay, extraKey, extraValue []byte) []byte {
	var start = len(b)
	b = append(b, make([]byte, batchHeaderLen)...)
	var count uint32
	o.Ascend(nil, nil, func(e txnkv.Entry) bool {
		b, count = appendRecord(b, e.Key, e.Value, e.Deleted), count+1
		return true
	})
	if extraKey != nil {
		b, count = appendRecord(b, extraKey, extraValue, false), count+1
	}
	binary.LittleEndian.PutUint32(b[start+8:], count)
	return b
}

// batchLen bounds the length of the batch of o with an extra Put of extra
// bytes.
func batchLen(o *txnkv.Overlay, extra int) int {
	return batchHeaderLen + o.Bytes() + (o.Len()+1)*batchRecordSlop + extra
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
