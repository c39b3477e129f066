package rocks

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/gazconsumer/gazconsumer/runtime"
)

var _ runtime.RangeSizer = (*Store)(nil)

// ApproximateSizes returns RocksDB's estimates of the bytes the store holds
// of each of ranges in its files (compressed, as written), from their
// indexes, without reading rows (see runtime.RangeSizer). Rows still in its
// memtables are not counted: RocksDB's estimates of those are of a skip
// list's levels, all of a memtable's rows or none. It may be called
// concurrently with transactions, and fails once the store is destroyed.
func (s *Store) ApproximateSizes(ranges [][2][]byte) ([]uint64, error) {
	s.asked.Lock()
	select {
	case <-s.closing:
		s.asked.Unlock()
		return nil, errors.New("store is closed")
	default:
	}
	s.tasks.Add(1) // Destroy waits for it before it closes the database.
	s.asked.Unlock()
	defer s.tasks.Done()

	var n = len(ranges)
	if n == 0 {
		return nil, nil
	}
	var starts, ends []byte
	var startEnds, endEnds = make([]int64, n), make([]int64, n)
	for i, r := range ranges {
		starts, ends = append(starts, r[0]...), append(ends, r[1]...)
		startEnds[i], endEnds[i] = int64(len(starts)), int64(len(ends))
	}
	var sizes = make([]uint64, n)
	if msg := C.gc_approximate_sizes(s.cdb, cbytes(starts), (*C.int64_t)(unsafe.Pointer(unsafe.SliceData(startEnds))),
		cbytes(ends), (*C.int64_t)(unsafe.Pointer(unsafe.SliceData(endEnds))), C.size_t(n),
		(*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(sizes)))); msg != nil {
		return nil, fmt.Errorf("estimating sizes of store %s: %w", s.dir, cError(msg))
	}
	return sizes, nil
}
