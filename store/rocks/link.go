package rocks

// #include "shim.h"
import "C"

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
)

// A new shard of a rescale, whose parent's primary runs in its member,
// starts from links of the parent's files rather than from a copy of its
// rows (Opener.LinkFiles): its recovery log adopts them, so that their
// bytes stay in the parent's log, and it records only the manifest, its own.
// The new shard also takes a copy of the parent's write-ahead logs as
// recorded (they're appended to as the parent goes on), adopted too, which
// hold what the parent's memtables do, and its database replays them as it
// opens. The parent begins to flush its memtables as it sees its split asked
// (Store.FlushAhead): the link waits for that flush, after which its logs
// hold only what it wrote since, which the new shard replays sooner than the
// parent would flush it; they're flushed first if they hold more than
// linkFlushWAL.

// linkFlushWAL bounds the bytes of write-ahead log a new shard linked to its
// parent's files replays as it opens: past it, the parent's memtables are
// flushed before the link. A replay of a memtable's whole log (64 MiB) took
// 0.6 to 1.2 s in bench/cmd/rescalebench, two new shards opening while their
// parents consumed, against the parent's flush of what it wrote since its
// flush ahead (0.24 s) and that flush's files becoming durable in its
// recovery log (0.18 s): docs/benchmarks.md.
var linkFlushWAL uint64 = 16 << 20

// sourcer is a FileRecorder which gives its recorded files as sources that
// another recovery log may adopt (*recoverylog.Recorder is one).
type sourcer interface {
	Sources(ctx context.Context, names ...string) ([]*recoverylog.Source, error)
}

// adopter is a FileRecorder which adopts files of another log, and lists
// what it records (*recoverylog.Recorder is one).
type adopter interface {
	FileRecorder
	Adopt(name string, src *recoverylog.Source) error
	RemoveAll() error
	Dir() string
}

// sharedFiles are the files of a store's database as of a version of it,
// with where its recovery log holds each: its table files, which are never
// changed, its write-ahead logs, which are appended to, and its manifest
// through that version.
type sharedFiles struct {
	dir      string
	tables   []string              // Names within dir.
	wals     []string              // Names within dir.
	sources  []*recoverylog.Source // Of tables, then wals.
	manifest string                // Name within dir.
	content  []byte                // Of the manifest, through the version.
}

// File types of rocksdb::FileType, as gc_live_files lists them.
const (
	walFile        = 0
	tableFile      = 2
	descriptorFile = 3
)

// shareFiles flushes the store's memtables, if their write-ahead logs hold
// more than linkFlushWAL, and calls fn with the files of its database as of
// then, once their bytes, as recorded, are committed to its recovery log.
// The database removes none of its files until fn returns. Its write-ahead
// logs hold what its memtables do: a copy of each, of the bytes recorded,
// holds the database's every write since its last flush.
func (s *Store) shareFiles(ctx context.Context, fn func(sharedFiles) error) error {
	var src, ok = s.rec.FileRecorder.(sourcer)
	if !ok {
		return fmt.Errorf("store %s: its recorder (%T) can't give its files for another log to adopt", s.dir, s.rec.FileRecorder)
	}
	// A flush begun ahead (FlushAhead) leaves the logs only what was
	// written since: the new shard replays those rather than have them
	// flushed too.
	var began = time.Now()
	if err := s.awaitFlush(ctx); err != nil {
		return fmt.Errorf("store %s: waiting for its flush: %w", s.dir, err)
	}
	var flushed = time.Now()
	if err := s.db.DisableFileDeletions(); err != nil {
		return fmt.Errorf("store %s: holding its files: %w", s.dir, err)
	}
	defer func() {
		if err := s.db.EnableFileDeletions(false); err != nil {
			slog.Warn("releasing the files of a store linked by another", "dir", s.dir, "err", err)
		}
	}()
	var sf = sharedFiles{dir: s.dir}
	var files, err = liveFiles(s.cdb, linkFlushWAL)
	if err != nil {
		return fmt.Errorf("store %s: listing its files: %w", s.dir, err)
	}
	var manifestSize, walSize int64
	for _, f := range files {
		switch f.kind {
		case tableFile:
			sf.tables = append(sf.tables, f.name)
		case walFile:
			sf.wals, walSize = append(sf.wals, f.name), walSize+f.size
		case descriptorFile:
			sf.manifest, manifestSize = f.name, f.size
		}
	}
	if sf.manifest == "" {
		return fmt.Errorf("store %s: its live files %v have no manifest", s.dir, files)
	}
	var m *os.File
	if m, err = os.Open(filepath.Join(s.dir, sf.manifest)); err == nil {
		sf.content = make([]byte, manifestSize)
		_, err = io.ReadFull(m, sf.content)
		m.Close()
	}
	if err != nil {
		return fmt.Errorf("store %s: reading %d bytes of its manifest: %w", s.dir, manifestSize, err)
	}
	var paths []string
	for _, name := range slices.Concat(sf.tables, sf.wals) {
		paths = append(paths, filepath.Join(s.dir, name))
	}
	var listed = time.Now()
	if sf.sources, err = src.Sources(ctx, paths...); err != nil {
		return fmt.Errorf("store %s: its files in its recovery log: %w", s.dir, err)
	}
	var sourced = time.Now()
	if err = fn(sf); err != nil {
		return err
	}
	slog.Debug("store shared its files", "store", s.dir, "tables", len(sf.tables), "wals", len(sf.wals), "walBytes", walSize, "manifest", len(sf.content),
		"flushedAhead", flushed.Sub(began), "listed", listed.Sub(flushed), "durable", sourced.Sub(listed), "linked", time.Since(sourced))
	return nil
}

// liveFile is a file gc_live_files lists.
type liveFile struct {
	kind int
	name string
	size int64
}

// liveFiles lists the live files of cdb as of one version of it, once its
// memtables are flushed if their write-ahead logs hold more than walSize
// bytes (0: always).
func liveFiles(cdb unsafe.Pointer, walSize uint64) ([]liveFile, error) {
	var out *C.char
	var n C.size_t
	if msg := C.gc_live_files(cdb, C.uint64_t(walSize), &out, &n); msg != nil {
		return nil, cError(msg)
	}
	defer C.free(unsafe.Pointer(out))
	var files []liveFile
	for _, l := range strings.Split(C.GoStringN(out, C.int(n)), "\n") {
		if l == "" {
			continue
		}
		var f liveFile
		var parts = strings.Split(l, "\t")
		var err error
		if len(parts) != 3 {
			err = fmt.Errorf("%d fields", len(parts))
		} else if f.kind, err = strconv.Atoi(parts[0]); err == nil {
			f.size, err = strconv.ParseInt(parts[2], 10, 64)
		}
		if err != nil {
			return nil, fmt.Errorf("a live file listed as %q: %w", l, err)
		}
		f.name = strings.TrimPrefix(parts[1], "/")
		files = append(files, f)
	}
	return files, nil
}

// LinkFiles makes the directory of rec, which records a new store, hold the
// database of parent, a store of this member, as of now, whose table files
// are linked (runtime.FileLinker): rec adopts them from parent's recovery
// log, and records the manifest. Whatever rec recorded before is removed,
// and so is what it links, if it fails. OpenStore then opens the database,
// the parent's rows in it.
func (o Opener) LinkFiles(ctx context.Context, parent runtime.Store, rec runtime.Recorder) error {
	var p, ok = parent.(*Store)
	if !ok {
		return fmt.Errorf("store %T is not a RocksDB store to link the files of", parent)
	}
	ad, ok := rec.(adopter)
	if !ok {
		return fmt.Errorf("recorder %T can't adopt the files of another log", rec)
	}
	var dir = ad.Dir()
	if err := ad.RemoveAll(); err != nil {
		return err
	}
	var err = p.shareFiles(ctx, func(sf sharedFiles) error {
		for i, name := range sf.tables {
			var target = filepath.Join(dir, name)
			if err := os.Link(filepath.Join(sf.dir, name), target); err != nil {
				return fmt.Errorf("linking a table file of store %s: %w", sf.dir, err)
			} else if err = ad.Adopt(target, sf.sources[i]); err != nil {
				return err
			}
		}
		for i, name := range sf.wals {
			// Appended to by the parent: a copy of what was recorded.
			var target, src = filepath.Join(dir, name), sf.sources[len(sf.tables)+i]
			if err := copyPrefix(filepath.Join(sf.dir, name), target, src.Node.Size); err != nil {
				return fmt.Errorf("copying a write-ahead log of store %s: %w", sf.dir, err)
			} else if err = ad.Adopt(target, src); err != nil {
				return err
			}
		}
		if err := writeRecorded(ad, filepath.Join(dir, sf.manifest), sf.content); err != nil {
			return err
		}
		return writeRecorded(ad, filepath.Join(dir, "CURRENT"), []byte(sf.manifest+"\n"))
	})
	if err != nil {
		if rerr := ad.RemoveAll(); rerr != nil {
			slog.Warn("removing the files of a failed link", "dir", dir, "err", rerr)
		}
	}
	return err
}

// copyPrefix copies the first n bytes of file from to a new file to.
func copyPrefix(from, to string, n int64) error {
	var in, err = os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err = io.CopyN(out, in, n); err != nil {
		out.Close()
		return fmt.Errorf("%d bytes of %s: %w", n, from, err)
	}
	return out.Close()
}

// writeRecorded writes file name with content, and records it.
func writeRecorded(rec FileRecorder, name string, content []byte) error {
	if err := os.WriteFile(name, content, 0o644); err != nil {
		return err
	}
	var fn, err = rec.NewWritableFile(name)
	if err == nil {
		err = rec.Append(fn, content)
	}
	if err == nil {
		err = rec.Close(fn)
	}
	if err != nil {
		return fmt.Errorf("recording %s: %w", name, err)
	}
	return nil
}

var _ runtime.FileLinker = Opener{}
