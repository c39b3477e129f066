// Package recoverylog records the file operations of a local store directory
// (a RocksDB database) into a Gazette journal, and plays them back to rebuild
// the directory on any machine.
//
// A Recorder frames each operation as an Op, chained to the one before by a
// sequence number and a checksum, and appends it through an
// AsyncJournalClient. An FSM applies ops and tracks the live file nodes,
// their names, and the log segments holding their ops; an op which doesn't
// follow the valid history (a fork by a deposed or foreign writer) is
// skipped, and any other invalid content fails playback with an error naming
// the journal and offset.
//
// Hints summarize the FSM: the live nodes with their segments, and the
// properties (small files kept whole). They're stored in etcd after commits,
// with older generations as backups. A Player given hints reads only the
// segments of live nodes, then the log from the hints' end, so that recovery
// costs about the size of the live state rather than of the log; Prunable
// tells which fragments no generation of hints needs.
//
// A broker may commit an append whose acknowledgement is then lost, so that
// the journal client appends it again and the log holds it twice, back to
// back. Players skip the copy, whose ops repeat seqs already played. A
// Recorder checks that each append commits where it expects, reads the log
// to recognize such copies of its own appends before an unexpected commit,
// and moves the offsets of its later ops and live segments past them; bytes
// of another writer fail it.
//
// A Player either tails the log as a hot standby, or finishes at the write
// head and appends a Fence op which also sets the journal's AuthorRegister.
// It applies its Fence as appended if the Fence committed right after the
// history it played; else it reads through it, past whatever precedes it
// (a deposed writer's ops, or a copy of the Fence appended again).
// Every append of a Recorder checks that register, so the broker rejects the
// appends of a deposed Recorder (REGISTER_MISMATCH). Should etcd lose the
// journal's registers, the broker accepts any check; the op chain still keeps
// a deposed writer's ops out of the valid history, as they follow neither
// the new author's Fence nor its ops.
//
// Wire format: each op is framed as u32le(len(op)) | u32le(crc32c(op)) | op,
// and a Write op's data follows its frame.
package recoverylog
