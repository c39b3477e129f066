package rocks

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/linxGnu/grocksdb"

	"github.com/gazconsumer/gazconsumer/runtime"
)

// loadFile is the name, in a store's directory, of the table file a load
// writes and then has RocksDB ingest.
const loadFile = "load.sst"

// BeginLoad begins a load of rows to the database of a store that has
// committed nothing yet (runtime.Loader): the rows added, of strictly
// increasing keys, are written to a table file as they're added, and the
// database ingests the file at Finish: no memtable or write-ahead log holds
// them, and the recovery log records the file once (its creation and
// writes, as they're made, and the link RocksDB ingests it by). The rows
// are held as the store's next commit is, and written past its
// transactions: a load is finished before the store's first transaction
// writes anything (a new shard of a rescale loads its share of its
// parent's state so, and then commits its checkpoint). Loaded again, the
// same rows replace those loaded before. One load at a time.
func (s *Store) BeginLoad() (runtime.Loading, error) {
	if cp, err := (*database)(s).Checkpoint(); err != nil {
		return nil, fmt.Errorf("store %s: reading its checkpoint: %w", s.dir, err)
	} else if cp != nil {
		return nil, fmt.Errorf("store %s: can't load rows into a store which has committed", s.dir)
	}
	var l = &loading{s: s, path: filepath.Join(s.dir, loadFile)}
	var eo = grocksdb.NewDefaultEnvOptions()
	defer eo.Destroy()
	l.w = grocksdb.NewSSTFileWriter(eo, s.opts) // Written through the recorded file system of s.opts.
	if err := l.w.Open(l.path); err != nil {
		l.w.Destroy()
		s.removeLoadFile(l.path)
		return nil, fmt.Errorf("store %s: creating a table file to load: %w", s.dir, err)
	}
	return l, nil
}

// loading is a load of a Store begun by BeginLoad.
type loading struct {
	s    *Store
	path string
	w    *grocksdb.SSTFileWriter // Nil once finished or aborted.
	n    int
	last []byte
}

// Add writes a row to the table file, after the last.
func (l *loading) Add(key, value []byte) error {
	if l.w == nil {
		return fmt.Errorf("store %s: a row added to a load ended", l.s.dir)
	} else if l.n != 0 && bytes.Compare(key, l.last) <= 0 {
		return fmt.Errorf("store %s: rows to load out of order: %q after %q", l.s.dir, key, l.last)
	} else if err := l.w.Put(key, value); err != nil {
		return fmt.Errorf("store %s: writing row %q to load: %w", l.s.dir, key, err)
	}
	l.last = append(l.last[:0], key...)
	l.n++
	return nil
}

// Finish has the database ingest the table file, and returns the count of
// its rows. It aborts the load if it fails.
func (l *loading) Finish() (int, error) {
	if l.w == nil {
		return 0, fmt.Errorf("store %s: a load finished after its end", l.s.dir)
	} else if l.n == 0 {
		l.Abort() // RocksDB can't write an empty table file.
		return 0, nil
	}
	var s = l.s
	if err := l.w.Finish(); err != nil {
		l.Abort()
		return 0, fmt.Errorf("store %s: finishing the table file to load: %w", s.dir, err)
	}
	var opts = grocksdb.NewDefaultIngestExternalFileOptions()
	defer opts.Destroy()
	opts.SetMoveFiles(true) // Linked into the database, not copied; then removed.
	opts.SetAllowGlobalSeqNo(true)
	opts.SetAllowBlockingFlush(true)
	if err := s.db.IngestExternalFile([]string{l.path}, opts); err != nil {
		if rerr := s.rec.failure(); rerr != nil {
			err = fmt.Errorf("recording: %w (rocksdb: %v)", rerr, err)
		}
		l.Abort()
		return 0, fmt.Errorf("store %s: ingesting the table file of %d rows: %w", s.dir, l.n, err)
	}
	l.w.Destroy()
	l.w = nil
	// A row cached before (present or absent) gives way to what's loaded.
	s.DropRowCache()
	return l.n, nil
}

// Abort ends the load without the database ingesting its rows, and removes
// its table file. It does nothing once the load ended.
func (l *loading) Abort() {
	if l.w == nil {
		return
	}
	_ = l.w.Finish() // Closes the file, if not finished yet, before it's removed.
	l.w.Destroy()
	l.w = nil
	l.s.removeLoadFile(l.path)
}

// removeLoadFile removes the table file of a load not ingested (if it's
// still there), from the directory and from the recovery log's files.
func (s *Store) removeLoadFile(path string) {
	if err := s.rec.Delete(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		slog.Warn("recording the removal of a table file not loaded", "path", path, "err", err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		slog.Warn("removing a table file not loaded", "path", path, "err", err)
	}
}
