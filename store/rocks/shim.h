// Bridge between the Go package and its C++ FileSystem shim.

#ifndef GAZCONSUMER_STORE_ROCKS_SHIM_H
#define GAZCONSUMER_STORE_ROCKS_SHIM_H

#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

// gc_install_recorded_fs replaces the Env held by c_env, a rocksdb_env_t
// created by rocksdb_create_default_env, with an Env whose FileSystem records
// its file operations through the Go recorder behind handle. It returns NULL,
// or an error message to be freed by the caller.
char* gc_install_recorded_fs(void* c_env, uintptr_t handle);

// gc_get reads key from c_db (a rocksdb_t) with c_ro (a
// rocksdb_readoptions_t), with RocksDB's performance counters off on the
// calling thread, in one call. It returns -1 if the key is absent, -2 on an
// error (*err is then set, to be freed by the caller), or else the value's
// length, having copied the value into buf if it fits within cap (if not,
// nothing is copied: call again with room for it).
int64_t gc_get(void* c_db, void* c_ro, const char* key, size_t key_len, char* buf, size_t cap, char** err);

// gc_multiget reads the n keys held one after the other in keys (the i-th
// ending at ends[i]) from c_db with c_ro, in one MultiGet, with RocksDB's
// performance counters off on the calling thread. It sets lens[i] to the
// length of the i-th key's value, or -1 if the key is absent, and returns
// the total length of the values, having copied them one after the other
// into buf if they fit within cap (if not, nothing is copied: call again
// with room for them), or -2 on an error (*err is then set, to be freed by
// the caller).
int64_t gc_multiget(void* c_db, void* c_ro, const char* keys, const int64_t* ends, size_t n, int64_t* lens, char* buf,
                    size_t cap, char** err);

// gc_approximate_sizes sets sizes[i] to the approximate bytes c_db (a
// rocksdb_t) holds in its files (not its memtables) of the i-th of n ranges
// of keys: from the i-th key of starts (held one after the other, the i-th
// ending at start_ends[i]) up to the i-th of ends (likewise, ending at
// end_ends[i]), exclusive. It returns NULL, or an error message to be freed
// by the caller.
char* gc_approximate_sizes(void* c_db, const char* starts, const int64_t* start_ends, const char* ends,
                           const int64_t* end_ends, size_t n, uint64_t* sizes);

// gc_batch_new returns a buffer of WriteBatch representations, as an
// opaque handle to be released with gc_batch_free: each write reuses the
// memory of the one before it.
void* gc_batch_new(void);

// gc_batch_free releases the buffer of gc_batch_new.
void gc_batch_free(void* b);

// gc_batch_capacity returns the bytes the buffer b holds.
size_t gc_batch_capacity(void* b);

// gc_batch_reserve sizes the buffer b to n bytes and returns its first, for
// the caller to write a WriteBatch's representation into (up to n bytes),
// or NULL and an error message in *err, to be freed by the caller.
char* gc_batch_reserve(void* b, size_t n, char** err);

// gc_batch_write writes the WriteBatch whose representation is the first n
// bytes of b (at least its 12-byte header) to c_db (a rocksdb_t) with c_wo (a
// rocksdb_writeoptions_t), with RocksDB's performance counters off on the
// calling thread, keeping the buffer's memory for the next. It returns NULL,
// or an error message to be freed by the caller.
char* gc_batch_write(void* c_db, void* c_wo, void* b, size_t n);

// gc_scan_new returns an iterator of c_db with c_ro, at the first key at or
// after start, as an opaque handle to be released with gc_scan_free.
void* gc_scan_new(void* c_db, void* c_ro, const char* start, size_t start_len);

// gc_scan_free releases the iterator of gc_scan_new.
void gc_scan_free(void* it);

// gc_scan_next copies the rows of the iterator from where it is, up to end
// (exclusive; none if has_end is 0), into buf, with RocksDB's performance
// counters off on the calling thread: each as its key's length and its
// value's length (4 bytes each, little-endian), the key and the value. It
// stops before a row that would not fit within cap, leaving the iterator
// at it, and returns the bytes copied; if the first row does not fit, it
// returns 0 and sets *need to its size. It returns -1 once no row is left,
// or -2 on an error (*err is then set, to be freed by the caller).
int64_t gc_scan_next(void* it, const char* end, size_t end_len, int has_end, char* buf, size_t cap, int64_t* need,
                     char** err);

// gc_wbm_new returns a new WriteBufferManager of buffer_size bytes whose
// memtable memory is charged to c_cache (a rocksdb_cache_t), as an opaque
// handle to be released with gc_wbm_destroy, or NULL and an error message
// in *err, to be freed by the caller.
void* gc_wbm_new(void* c_cache, size_t buffer_size, char** err);

// gc_wbm_destroy releases the handle of gc_wbm_new: the manager lives on
// while options or databases given it hold it.
void gc_wbm_destroy(void* wbm);

// gc_wbm_usage returns the memory of the memtables the manager accounts,
// and of their mutable part in *mutable_usage.
size_t gc_wbm_usage(void* wbm, size_t* mutable_usage);

// gc_wbm_buffer_size returns the manager's budget.
size_t gc_wbm_buffer_size(void* wbm);

// gc_options_set_wbm makes the databases opened with c_opts (a
// rocksdb_options_t) share the manager wbm.
void gc_options_set_wbm(void* c_opts, void* wbm);

// gc_options_set_avoid_flush_during_recovery sets RocksDB's option
// avoid_flush_during_recovery of c_opts (a rocksdb_options_t), which its C
// API lacks.
void gc_options_set_avoid_flush_during_recovery(void* c_opts, int v);

// gc_options_set_filtered_memtable makes the memtables of the databases
// opened with c_opts (a rocksdb_options_t) skip lists which keep a Bloom
// filter of their keys, of ratio times the options' write buffer size (at
// least min_bytes), by which an in-place update of a key the memtable lacks
// needs no search of it, and an index of their keys, of at most index_ratio
// times that size, by which an in-place update of a key the memtable holds
// needs none either (memtable.cc). A Get of a key the filter lacks needs
// no search either: where RocksDB's layout of a lookup is known (7.8), and
// without a prefix extractor, the options' own memtable Bloom filter
// (memtable_prefix_bloom_size_ratio), which would only hash each key once
// more, is turned off. It does so, and returns 1, only if the options update
// in place, write memtables from one thread, have RocksDB's default skip
// list memtable, and compare keys as bytes (RocksDB's bytewise comparator,
// or its reverse); else it returns 0.
int gc_options_set_filtered_memtable(void* c_opts, double ratio, size_t min_bytes, double index_ratio);

// gc_options_resize_filtered_memtable sizes the filters and indexes of the
// memtables made from now on, by databases opened with c_opts (filtered by
// gc_options_set_filtered_memtable, else it does nothing), for memtables of
// write_buffer_size bytes.
void gc_options_resize_filtered_memtable(void* c_opts, size_t write_buffer_size);

// gc_live_files lists the live files of c_db (a rocksdb_t), as of one
// version of it, flushing its memtables first if its write-ahead logs hold
// wal_size_for_flush bytes or more: a line for each, of its type (a
// rocksdb::FileType), its name relative to the database's directory, and
// its size (the bytes of it the version holds), separated by tabs, in
// *out (of *out_len bytes, to be freed by the caller). Call it with the
// database's file deletions disabled, else the files may be gone before
// they're used. It returns NULL, or an error message to be freed by the
// caller.
char* gc_live_files(void* c_db, uint64_t wal_size_for_flush, char** out, size_t* out_len);

// gc_crc32c_extend returns the CRC-32C of A followed by data[0, n), where
// init_crc is the CRC-32C of A, as the program computes RocksDB's checksums
// (crc32c.cc).
uint32_t gc_crc32c_extend(uint32_t init_crc, const char* data, size_t n);

// gc_crc32c_table is gc_crc32c_extend as computed where the processor has
// no CRC-32C instruction: from a table.
uint32_t gc_crc32c_table(uint32_t init_crc, const char* data, size_t n);

// gc_crc32c_interposed returns 1 if RocksDB's calls of its CRC-32C reach
// the program's definition (gc_crc32c_extend's), else 0.
int gc_crc32c_interposed(void);

// gc_crc32c_rocksdb sets *out to RocksDB's own CRC-32C of data[0, n),
// extending init_crc, and returns 0, or returns -1 if its definition can't
// be found apart from the program's.
int gc_crc32c_rocksdb(uint32_t init_crc, const char* data, size_t n, uint32_t* out);

#ifdef __cplusplus
}
#endif

#endif
