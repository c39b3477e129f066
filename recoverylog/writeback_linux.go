//go:build linux

package recoverylog

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to begin writing file's dirty pages to its
// device, without waiting for the writes (sync_file_range(2) with
// SYNC_FILE_RANGE_WRITE, as RocksDB's bytes_per_sync does). Whether the
// pages are durable is what an fsync, if any, settles.
func startWriteback(file *os.File) error {
	var rc, err = file.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) { err = unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE) }); cerr != nil {
		return cerr
	}
	return err
}
