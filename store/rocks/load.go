package rocks

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/linxGnu/grocksdb"
)

// loadFile is the name, in a store's directory, of the table file Load
// writes and then has RocksDB ingest.
const loadFile = "load.sst"

// Load writes rows, of strictly increasing keys, to the database of a store
// that has committed nothing yet, as one table file that RocksDB ingests:
// no memtable or write-ahead log holds them, and the recovery log records
// the file once (its creation, writes, and the link RocksDB ingests it
// by). The rows are held as the store's next commit is, and written past
// its transactions: Load is called before the store's first transaction
// writes anything (a new shard of a rescale loads its share of its
// parent's state so, and then commits its checkpoint). Loaded again, the
// same rows replace those loaded before.
func (s *Store) Load(rows iter.Seq2[[]byte, []byte]) (int, error) {
	if cp, err := (*database)(s).Checkpoint(); err != nil {
		return 0, fmt.Errorf("store %s: reading its checkpoint: %w", s.dir, err)
	} else if cp != nil {
		return 0, fmt.Errorf("store %s: can't load rows into a store which has committed", s.dir)
	}
	var path = filepath.Join(s.dir, loadFile)
	var eo = grocksdb.NewDefaultEnvOptions()
	defer eo.Destroy()
	var w = grocksdb.NewSSTFileWriter(eo, s.opts) // Written through the recorded file system of s.opts.
	defer w.Destroy()
	if err := w.Open(path); err != nil {
		return 0, fmt.Errorf("store %s: creating a table file to load: %w", s.dir, err)
	}
	var ingested bool
	defer func() {
		if !ingested {
			_ = w.Finish() // Closes the file, if not finished yet, before it's removed.
			s.removeLoadFile(path)
		}
	}()
	var n int
	var last []byte
	for key, value := range rows {
		if n != 0 && bytes.Compare(key, last) <= 0 {
			return 0, fmt.Errorf("store %s: rows to load out of order: %q after %q", s.dir, key, last)
		} else if err := w.Put(key, value); err != nil {
			return 0, fmt.Errorf("store %s: writing row %q to load: %w", s.dir, key, err)
		}
		last = append(last[:0], key...)
		n++
	}
	if n == 0 {
		return 0, nil // RocksDB can't write an empty table file.
	}
	if err := w.Finish(); err != nil {
		return 0, fmt.Errorf("store %s: finishing the table file to load: %w", s.dir, err)
	}
	var opts = grocksdb.NewDefaultIngestExternalFileOptions()
	defer opts.Destroy()
	opts.SetMoveFiles(true) // Linked into the database, not copied; then removed.
	opts.SetAllowGlobalSeqNo(true)
	opts.SetAllowBlockingFlush(true)
	if err := s.db.IngestExternalFile([]string{path}, opts); err != nil {
		if rerr := s.rec.failure(); rerr != nil {
			err = fmt.Errorf("recording: %w (rocksdb: %v)", rerr, err)
		}
		return 0, fmt.Errorf("store %s: ingesting the table file of %d rows: %w", s.dir, n, err)
	}
	ingested = true
	// A row cached before (present or absent) gives way to what's loaded.
	s.DropRowCache()
	return n, nil
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
