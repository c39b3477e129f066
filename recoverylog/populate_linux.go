package recoverylog

import "golang.org/x/sys/unix"

// populate maps bytes [from, to) of mapped data into the process's page
// tables at once (their pages being in the page cache), rather than page
// fault by page fault as they are read. Where the kernel can't (before
// Linux 5.14), they fault.
func populate(data []byte, from, to int64) { advise(data, from, to, unix.MADV_POPULATE_READ) }
