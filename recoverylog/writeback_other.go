//go:build !linux

package recoverylog

import (
	"errors"
	"os"
)

// startWriteback fails where sync_file_range(2) is missing: the kernel
// writes the file's pages back when it will.
func startWriteback(*os.File) error { return errors.ErrUnsupported }
