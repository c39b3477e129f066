//go:build !(linux || darwin || freebsd || netbsd || openbsd)

package recoverylog

import "errors"

// mapFile fails where this package maps no files: fragments are read through
// their URLs.
func mapFile(string, int64) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapFile([]byte) {}

func adviseWillNeed([]byte, int64, int64) {}
