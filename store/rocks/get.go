package rocks

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"unsafe"

	"github.com/linxGnu/grocksdb"
)

// cPointer returns the C object that v, a *grocksdb.DB, ReadOptions,
// WriteOptions, Options or Cache, wraps: the first field of each. grocksdb
// exposes no way to reach it, and the store calls RocksDB through its shim
// for reads (see get), for writes (see batchBuffer) and for what grocksdb
// lacks (a WriteBufferManager: see Budget).
func cPointer[T grocksdb.DB | grocksdb.ReadOptions | grocksdb.WriteOptions | grocksdb.Options | grocksdb.Cache](v *T) (unsafe.Pointer, error) {
	var f = reflect.TypeFor[T]().Field(0)
	if f.Offset != 0 || f.Type.Kind() != reflect.Pointer || f.Name != "c" {
		return nil, fmt.Errorf("%s layout changed: its first field is %s %s", reflect.TypeFor[T](), f.Name, f.Type)
	}
	return *(*unsafe.Pointer)(unsafe.Pointer(v)), nil
}

// cHandles returns the C objects of db and ro, for the shim's reads.
func cHandles(db *grocksdb.DB, ro *grocksdb.ReadOptions) (cdb, cro unsafe.Pointer, err error) {
	if cdb, err = cPointer(db); err == nil {
		cro, err = cPointer(ro)
	}
	return cdb, cro, err
}

// cbytes returns a pointer to b's first byte, or nil if b is empty.
func cbytes(b []byte) *C.char {
	if len(b) == 0 {
		return nil
	}
	return (*C.char)(unsafe.Pointer(unsafe.SliceData(b)))
}

// cError returns the message msg of the shim, which it frees, as an error.
func cError(msg *C.char) error {
	defer C.free(unsafe.Pointer(msg))
	return errors.New(C.GoString(msg))
}

// get reads the value of key from the database into buf (which it grows if
// need be), with one call into C. It turns RocksDB's per-thread performance
// counters off first, as write does: on by default, they count every key
// comparison of a lookup, a lookup of thread-local storage each, for a third
// of the time of a Get of a key the memtable or the block cache holds.
func (s *Store) get(key, buf []byte) ([]byte, bool, error) {
	for {
		var cerr *C.char
		var n = int64(C.gc_get(s.cdb, s.cro, cbytes(key), C.size_t(len(key)), cbytes(buf[:cap(buf)]), C.size_t(cap(buf)), &cerr))
		switch {
		case n == -2:
			return nil, false, cError(cerr)
		case n < 0:
			return buf[:0], false, nil
		case n <= int64(cap(buf)):
			return buf[:n], true, nil
		}
		buf = make([]byte, 0, max(n, 2*int64(cap(buf))))
	}
}

// multiGet holds the keys of a MultiGet, and then their values.
type multiGet struct {
	keys   []byte  // The keys, one after the other.
	ends   []int64 // Where each key of keys ends.
	hashes []uint64
	lens   []int64 // Of each key's value, or -1 if it is absent.
	values []byte  // The values of the keys present, one after the other.
	offs   []int   // Where each key's value begins in values.

	added map[uint64]struct{} // The hashes of the keys added.
}

func (m *multiGet) reset() {
	m.keys, m.ends, m.hashes = m.keys[:0], m.ends[:0], m.hashes[:0]
	clear(m.added)
}

// first reports whether no key of hash h was added since the last reset.
func (m *multiGet) first(h uint64) bool {
	if m.added == nil {
		m.added = make(map[uint64]struct{})
	} else if _, ok := m.added[h]; ok {
		return false
	}
	m.added[h] = struct{}{}
	return true
}

// add adds key, of hash h.
func (m *multiGet) add(key []byte, h uint64) {
	m.keys = append(m.keys, key...)
	m.ends = append(m.ends, int64(len(m.keys)))
	m.hashes = append(m.hashes, h)
}

// key returns the i-th key.
func (m *multiGet) key(i int) []byte {
	var begin int64
	if i != 0 {
		begin = m.ends[i-1]
	}
	return m.keys[begin:m.ends[i]]
}

// value returns the value of the i-th key, and whether the key is present.
func (m *multiGet) value(i int) ([]byte, bool) {
	if m.lens[i] < 0 {
		return nil, false
	}
	return m.values[m.offs[i] : m.offs[i]+int(m.lens[i])], true
}

// multiGet reads the keys of m from the database, in one MultiGet of
// RocksDB (which sorts them, and looks them up level by level, in batches),
// with one call into C, with RocksDB's per-thread performance counters off
// (see get).
func (s *Store) multiGet(m *multiGet) error {
	var n = len(m.ends)
	m.lens = slices.Grow(m.lens[:0], n)[:n]
	for {
		var cerr *C.char
		var total = int64(C.gc_multiget(s.cdb, s.cro,
			cbytes(m.keys), (*C.int64_t)(unsafe.Pointer(unsafe.SliceData(m.ends))), C.size_t(n),
			(*C.int64_t)(unsafe.Pointer(unsafe.SliceData(m.lens))), cbytes(m.values[:cap(m.values)]), C.size_t(cap(m.values)), &cerr))
		switch {
		case total == -2:
			return cError(cerr)
		case total <= int64(cap(m.values)):
			m.values = m.values[:total]
			m.offs = slices.Grow(m.offs[:0], n)[:n]
			var off int
			for i, l := range m.lens {
				m.offs[i] = off
				off += int(max(l, 0))
			}
			return nil
		}
		m.values = make([]byte, 0, max(total, 2*int64(cap(m.values))))
	}
}
