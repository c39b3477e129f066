package rocks

// #include "shim.h"
import "C"

// RocksDB's checksums of its write-ahead logs' records and its MANIFEST are
// computed by crc32c.cc's definition of RocksDB's CRC-32C, with the
// processor's instruction: see its header. The functions below let the
// package's tests check it.

// crc32cExtend returns the CRC-32C of A followed by b, where crc is A's, as
// RocksDB's calls compute it.
func crc32cExtend(crc uint32, b []byte) uint32 {
	return uint32(C.gc_crc32c_extend(C.uint32_t(crc), cbytes(b), C.size_t(len(b))))
}

// crc32cTable returns crc32cExtend's result as computed where the
// processor has no CRC-32C instruction.
func crc32cTable(crc uint32, b []byte) uint32 {
	return uint32(C.gc_crc32c_table(C.uint32_t(crc), cbytes(b), C.size_t(len(b))))
}

// crc32cInterposed reports whether RocksDB's calls of its CRC-32C reach
// crc32cExtend's definition.
func crc32cInterposed() bool { return C.gc_crc32c_interposed() == 1 }

// rocksdbCRC32C returns RocksDB's own CRC-32C of b, extending crc, and
// whether its definition was found apart from crc32cExtend's.
func rocksdbCRC32C(crc uint32, b []byte) (uint32, bool) {
	var out C.uint32_t
	if C.gc_crc32c_rocksdb(C.uint32_t(crc), cbytes(b), C.size_t(len(b)), &out) != 0 {
		return 0, false
	}
	return uint32(out), true
}
