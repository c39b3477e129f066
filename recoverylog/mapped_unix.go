//go:build linux || darwin || freebsd || netbsd || openbsd

package recoverylog

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the file at path, read-only, which must hold size bytes.
func mapFile(path string, size int64) ([]byte, error) {
	var f, err = os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // The mapping holds the file.
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if fi.Size() != size {
		return nil, fmt.Errorf("file holds %d bytes, not the fragment's %d", fi.Size(), size)
	} else if size == 0 || size != int64(int(size)) {
		return nil, fmt.Errorf("file of %d bytes can't be mapped", size)
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %w", path, err)
	}
	_ = unix.Madvise(data, unix.MADV_SEQUENTIAL) // Advice: its failure changes nothing.
	return data, nil
}

// unmapFile unmaps data, which mapFile returned.
func unmapFile(data []byte) { _ = unix.Munmap(data) }

// adviseWillNeed asks the kernel to read bytes [from, to) of mapped data
// ahead, in the background.
func adviseWillNeed(data []byte, from, to int64) { advise(data, from, to, unix.MADV_WILLNEED) }

// advise gives the kernel advice about bytes [from, to) of mapped data,
// from the start of from's page. Its failure changes nothing.
func advise(data []byte, from, to int64, advice int) {
	var page = int64(os.Getpagesize())
	from -= from % page
	if from < to {
		_ = unix.Madvise(data[from:to], advice)
	}
}
