package rocks

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"unsafe"

	"github.com/linxGnu/grocksdb"
)

// cPointer returns the C object that v, a *grocksdb.DB, ReadOptions,
// Options or Cache, wraps: the first field of each. grocksdb exposes no way
// to reach it, and the store calls RocksDB through its shim for reads (see
// get) and for what grocksdb lacks (a WriteBufferManager: see Budget).
func cPointer[T grocksdb.DB | grocksdb.ReadOptions | grocksdb.Options | grocksdb.Cache](v *T) (unsafe.Pointer, error) {
	var f = reflect.TypeFor[T]().Field(0)
	if f.Offset != 0 || f.Type.Kind() != reflect.Pointer || f.Name != "c" {
		return nil, fmt.Errorf("%s layout changed: its first field is %s %s", reflect.TypeFor[T](), f.Name, f.Type)
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(v)), nil
}

// get reads the value of key from the database into buf (which it grows if
// need be), with one call into C. It turns RocksDB's per-thread performance
// counters off first, as write does: on by default, they count every key
// comparison of a lookup, a lookup of thread-local storage each, for a third
// of the time of a Get of a key the memtable or the block cache holds.
func (s *Store) get(key, buf []byte) ([]byte, bool, error) {
	for {
		var kp, bp *C.char
		if len(key) != 0 {
			kp = (*C.char)(unsafe.Pointer(unsafe.SliceData(key)))
		}
		if cap(buf) != 0 {
			bp = (*C.char)(unsafe.Pointer(unsafe.SliceData(buf[:cap(buf)])))
		}
		var cerr *C.char
		var n = int64(C.gc_get(s.cdb, s.cro, kp, C.size_t(len(key)), bp, C.size_t(cap(buf)), &cerr))
		switch {
		case n == -2:
			var msg = C.GoString(cerr)
			C.free(unsafe.Pointer(cerr))
			return nil, false, errors.New(msg)
		case n < 0:
			return buf[:0], false, nil
		case n <= int64(cap(buf)):
			return buf[:n], true, nil
		}
		buf = make([]byte, 0, max(n, 2*int64(cap(buf))))
	}
}
