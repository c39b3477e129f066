//go:build !linux

package recoverylog

// populate does nothing where the kernel populates no mapped pages on
// advice: they fault in as they are read.
func populate([]byte, int64, int64) {}
