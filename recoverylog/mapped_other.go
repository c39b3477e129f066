//go:build !unix

package recoverylog

import "errors"

// mapFile fails where the system maps no files: fragments are read through
// their URLs.
func mapFile(string, int64) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapFile([]byte) {}

func adviseWillNeed([]byte, int64, int64) {}

func populate([]byte, int64, int64) {}
