//go:build linux

package recoverylog

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to begin writing file's dirty pages to its
// device, without waiting for the writes (sync_file_range(2) with
// SYNC_FILE_RANGE_WRITE, as RocksDB's bytes_per_sync does). Whether the
// pages are durable is what an fsync, if any, settles. A file system that
// doesn't support it fails with errors.ErrUnsupported; a closed file, with
// os.ErrClosed.
func startWriteback(file *os.File) error {
	var rc, err = file.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) { err = unix.SyncFileRange(int(fd), 0, 0, unix.SYNC_FILE_RANGE_WRITE) }); cerr != nil {
		return fmt.Errorf("%w: %w", os.ErrClosed, cerr) // Its one failure: the file was closed.
	}
	switch {
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EINVAL), errors.Is(err, unix.ESPIPE), errors.Is(err, unix.EOPNOTSUPP):
		return fmt.Errorf("%w: sync_file_range: %w", errors.ErrUnsupported, err)
	case err != nil:
		return fmt.Errorf("sync_file_range: %w", err)
	}
	return nil
}
