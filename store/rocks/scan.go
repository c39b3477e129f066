package rocks

// #include "shim.h"
import "C"

import (
	"encoding/binary"
	"sync"
	"unsafe"
)

// scanBatch is the size of the buffers into which a Scan copies the rows
// it iterates, many at a time, with one call into C: a call of grocksdb's
// iterator a row (its Valid, Key, Value and Next, with RocksDB's per-thread
// performance counters on) takes several times as long as the copy.
const scanBatch = 256 << 10

// scanBufs holds the buffers of Scans.
var scanBufs = sync.Pool{New: func() any { var b = make([]byte, scanBatch); return &b }}

// scan calls fn with each key and value of the database in [start, end)
// (a nil end has no bound), in key order, until fn returns false. The
// slices passed to fn are valid until it returns.
func scan(cdb, cro unsafe.Pointer, start, end []byte, fn func(key, value []byte) bool) error {
	var it = C.gc_scan_new(cdb, cro, cbytes(start), C.size_t(len(start)))
	defer C.gc_scan_free(it)
	var hasEnd C.int
	if end != nil {
		hasEnd = 1
	}
	var bp = scanBufs.Get().(*[]byte)
	defer scanBufs.Put(bp)
	for {
		var buf = *bp
		var need C.int64_t
		var cerr *C.char
		var n = int64(C.gc_scan_next(it, cbytes(end), C.size_t(len(end)), hasEnd,
			cbytes(buf), C.size_t(len(buf)), &need, &cerr))
		switch {
		case n == -1:
			return nil
		case n == -2:
			return cError(cerr)
		case n == 0:
			// One row larger than the buffer: a buffer of its own.
			var big = make([]byte, need)
			bp = &big
			continue
		}
		for b := buf[:n]; len(b) != 0; {
			var kl, vl = binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:])
			var key = b[8 : 8+kl : 8+kl]
			var value = b[8+kl : 8+kl+vl : 8+kl+vl]
			if !fn(key, value) {
				return nil
			}
			b = b[8+kl+vl:]
		}
	}
}
