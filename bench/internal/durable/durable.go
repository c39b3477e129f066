// Package durable makes a directory's files durable, so that the recovery
// benchmarks compare a player's output with a write of the same durability:
// neither player fsyncs what it writes (gazconsumer's recoverylog nor
// Gazette's), so each command times its playback alone (in the page cache,
// as after an unsynced write) and then SyncTree of its directory (as after
// a write with fsync), and reports both.
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// SyncTree fsyncs every regular file under dir, then every directory (dir
// included, deepest first), so that the files and their names are durable.
// It returns how long that took.
func SyncTree(dir string) (time.Duration, error) {
	var began = time.Now()
	var dirs []string
	var err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir():
			dirs = append(dirs, path)
			return nil
		case d.Type().IsRegular():
			return syncPath(path)
		default:
			return nil
		}
	})
	if err != nil {
		return 0, fmt.Errorf("syncing the files of %s: %w", dir, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err = syncPath(dirs[i]); err != nil {
			return 0, fmt.Errorf("syncing the directories of %s: %w", dir, err)
		}
	}
	return time.Since(began), nil
}

// WriteFile writes n bytes to a new file at path in 4 MiB writes, and
// returns how long the writes took, and then how long fsyncing the file and
// its directory took.
func WriteFile(path string, n int64) (write, sync time.Duration, err error) {
	var buf = make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	var began = time.Now()
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, err
	}
	for w := int64(0); w < n; w += int64(len(buf)) {
		if _, err = f.Write(buf[:min(int64(len(buf)), n-w)]); err != nil {
			return 0, 0, errors.Join(fmt.Errorf("writing %s: %w", path, err), f.Close())
		}
	}
	write = time.Since(began)
	began = time.Now()
	if err = f.Sync(); err != nil {
		return 0, 0, errors.Join(fmt.Errorf("fsyncing %s: %w", path, err), f.Close())
	}
	if err = f.Close(); err != nil {
		return 0, 0, err
	}
	if err = syncPath(filepath.Dir(path)); err != nil {
		return 0, 0, err
	}
	return write, time.Since(began), nil
}

func syncPath(path string) error {
	var f, err = os.Open(path)
	if err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return errors.Join(fmt.Errorf("fsyncing %s: %w", path, err), f.Close())
	}
	return f.Close()
}
