// RocksDB's CRC-32C, computed with the processor's instruction.
//
// RocksDB checksums each record of its write-ahead log and its MANIFEST
// with CRC-32C (rocksdb::crc32c::Extend; a write-ahead log's checksum can't
// be chosen, unlike a table file's). It chooses, as it loads, between the
// SSE4.2 instruction and a table read a byte at a time, and Debian's build
// (portable, without SSE4.2) has only the table: 1.4 GB/s here, about 0.7 µs
// a row of 1 KiB, where the instruction does 8 bytes in a few cycles. The
// library calls Extend through its procedure linkage table, so that the
// definition below, which the program exports, is the one its calls reach:
// the same function (CRC-32C, Castagnoli's polynomial, reflected, the
// running value inverted before and after), with the instruction where the
// processor has it and a table otherwise. Its results equal RocksDB's own,
// byte for byte (TestCRC32CAgreesWithRocksDB compares both ways of computing
// them with RocksDB's own and Go's, and checks that RocksDB's calls reach
// this one), so that logs written before and after it read alike.

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shim.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace {

// Table of the reflected polynomial 0x82F63B78, a byte at a time.
struct Table {
  uint32_t v[256];
  constexpr Table() : v() {
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
      v[i] = c;
    }
  }
};
constexpr Table kTable;

uint32_t ExtendTable(uint32_t l, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; i++) l = kTable.v[(l ^ p[i]) & 0xff] ^ (l >> 8);
  return l;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t ExtendSSE42(uint32_t l, const uint8_t* p, size_t n) {
  uint64_t l64 = l;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    l64 = _mm_crc32_u64(l64, w);
  }
  uint32_t l32 = static_cast<uint32_t>(l64);
  for (; n > 0; n--, p++) l32 = _mm_crc32_u8(l32, *p);
  return l32;
}

bool HaveSSE42() {
  __builtin_cpu_init();  // Calls may come before the program's initializers run.
  return __builtin_cpu_supports("sse4.2");
}
#endif

// kExtendSymbol is the mangled name of rocksdb::crc32c::Extend.
constexpr const char kExtendSymbol[] = "_ZN7rocksdb6crc32c6ExtendEjPKcm";

using ExtendFn = uint32_t (*)(uint32_t, const char*, size_t);

// RocksDBsExtend is the Extend the library defining RocksDB's other
// functions defines: its own, whose calls the definition below takes.
ExtendFn RocksDBsExtend() {
  Dl_info info;
  void* other = dlsym(RTLD_DEFAULT, "_ZN7rocksdb6crc32c13Crc32cCombineEjjm");
  if (other == nullptr || dladdr(other, &info) == 0 || info.dli_fname == nullptr) return nullptr;
  void* lib = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return nullptr;
  void* own = dlsym(lib, kExtendSymbol);  // The library's scope, before the program's.
  dlclose(lib);
  return reinterpret_cast<ExtendFn>(own);
}

}  // namespace

namespace rocksdb {
namespace crc32c {

// Extend returns the CRC-32C of A followed by data[0, n), where init_crc is
// the CRC-32C of A. Its signature is RocksDB's (util/crc32c.h).
uint32_t Extend(uint32_t init_crc, const char* data, size_t n) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(data);
  uint32_t l = init_crc ^ 0xffffffffu;
#if defined(__x86_64__)
  static const bool sse42 = HaveSSE42();
  if (sse42) return ExtendSSE42(l, p, n) ^ 0xffffffffu;
#endif
  return ExtendTable(l, p, n) ^ 0xffffffffu;
}

}  // namespace crc32c
}  // namespace rocksdb

extern "C" uint32_t gc_crc32c_extend(uint32_t init_crc, const char* data, size_t n) {
  return rocksdb::crc32c::Extend(init_crc, data, n);
}

extern "C" uint32_t gc_crc32c_table(uint32_t init_crc, const char* data, size_t n) {
  return ExtendTable(init_crc ^ 0xffffffffu, reinterpret_cast<const uint8_t*>(data), n) ^ 0xffffffffu;
}

extern "C" int gc_crc32c_interposed(void) {
  return dlsym(RTLD_DEFAULT, kExtendSymbol) == reinterpret_cast<void*>(&rocksdb::crc32c::Extend);
}

extern "C" int gc_crc32c_rocksdb(uint32_t init_crc, const char* data, size_t n, uint32_t* out) {
  static const ExtendFn own = RocksDBsExtend();
  if (own == nullptr || own == &rocksdb::crc32c::Extend) return -1;
  *out = own(init_crc, data, n);
  return 0;
}
