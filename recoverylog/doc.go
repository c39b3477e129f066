// Package recoverylog records the file operations of a local store directory
// (a RocksDB database) into a Gazette journal, and plays them back to rebuild
// the directory on any machine.
//
// A Recorder frames each operation as an Op, chained to the one before by a
// sequence number and a checksum, and appends it through an
// AsyncJournalClient. Its appends carry a register check, so that once a
// Player has fenced the log for a new recorder, the broker rejects every
// append of the deposed one. An FSM applies ops and tracks the live file
// nodes, their names, and the log segments holding their data; Hints
// summarize it so that a Player reads only the segments that still matter.
//
// Wire format: each op is framed as u32le(len(op)) | u32le(crc32c(op)) | op,
// and a Write op's data follows its frame.
package recoverylog
