// Package rocks is a runtime.Store kept in RocksDB, whose every file
// operation is recorded into the shard's recovery log so that another process
// can play the log back and continue from the last committed checkpoint.
//
// A small C++ FileSystem (shim.cc) wraps RocksDB's default file system. It
// records each writable file's creation, appends, syncs and close, and each
// rename, link and delete, through a FileRecorder called from RocksDB's
// threads. A recorder failure fails the RocksDB operation which caused it, so
// that no write is lost silently. WAL recycling is off, as recycled logs
// would be rewritten in place.
//
// Its transactions are those of package txnkv: a transaction's writes
// collect in an ordered in-memory overlay, which reads and scans of the
// transaction see, merged over a commit still in flight and the database.
// StartCommit waits for the transaction's appends (its waitFor futures),
// then the store encodes the overlay and the checkpoint as one WriteBatch,
// writes it atomically, and resolves once the recovery log holds the write.
//
// The database updates rows of its memtable in place, and its memtables
// (memtable.cc) are RocksDB's skip list with a Bloom filter of the keys each
// holds, so that a commit's rows the memtable lacks, most of a large key
// space's, are added without first being searched for, and reads of them need
// no search of it either.
//
// A store opening (recovered from its log, or a rescale's new shard linked
// to its parent's files) replays the write-ahead logs its memtables had not
// flushed. Where each of them ends with a whole record, it keeps them, its
// memtable holding what they do, rather than flush that to a table file
// which its recorder would append to the log before the store serves; a
// log which ends within a record (its writer died as it wrote it) is
// flushed, so that no later log is replayed behind a torn record (wal.go).
//
// RocksDB checksums its write-ahead logs' records with CRC-32C, which
// Debian's portable build computes from a table, a byte at a time. The
// package defines RocksDB's CRC-32C function (crc32c.cc), which the library
// calls through its procedure linkage table, with the processor's
// instruction: the same checksums, eight times as fast.
package rocks
