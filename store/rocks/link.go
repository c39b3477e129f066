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
	"strings"
	"time"
	"unsafe"

	"github.com/linxGnu/grocksdb"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/txnkv"
)

// A new shard of a rescale, whose parent's primary runs in its member,
// starts from links of the parent's table files rather than from a copy of
// its rows (Opener.LinkFiles): its recovery log adopts them, so that their
// bytes stay in the parent's log, and it records only the manifest, its own.

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

// sharedFiles are the files of a store's database as of a version of it:
// its table files, which are never changed, with where the recovery log
// holds each, and its manifest through that version.
type sharedFiles struct {
	dir      string
	tables   []string // Names within dir.
	sources  []*recoverylog.Source
	manifest string // Name within dir.
	content  []byte // Of the manifest, through the version.
}

// shareFiles calls fn with the files of the store's database as of the
// flush of its memtable begun as its last split was written (see Forked),
// or else as of a flush now, once their table files' bytes are committed
// to its recovery log. The database removes none of its files until fn
// returns.
func (s *Store) shareFiles(ctx context.Context, fn func(sharedFiles) error) error {
	var src, ok = s.rec.FileRecorder.(sourcer)
	if !ok {
		return fmt.Errorf("store %s: its recorder (%T) can't give its files for another log to adopt", s.dir, s.rec.FileRecorder)
	}
	if err := s.db.DisableFileDeletions(); err != nil {
		return fmt.Errorf("store %s: holding its files: %w", s.dir, err)
	}
	defer func() {
		if err := s.db.EnableFileDeletions(false); err != nil {
			slog.Warn("releasing the files of a store linked by another", "dir", s.dir, "err", err)
		}
	}()
	var sf = sharedFiles{dir: s.dir}
	var began = time.Now()
	// The last split's rows are in its table files once the flush begun
	// as it was written is done: they're shared as of then. Else, as of a
	// flush of the memtable now.
	var flush = true
	if f := s.forkFlush.Load(); f != nil {
		select {
		case <-f.done:
			flush = f.err != nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var names, manifestSize, err = liveFiles(s.cdb, flush)
	if err != nil {
		return fmt.Errorf("store %s: listing its files: %w", s.dir, err)
	}
	var paths []string
	for _, name := range names {
		switch {
		case strings.HasSuffix(name, ".sst"):
			sf.tables = append(sf.tables, name)
			paths = append(paths, filepath.Join(s.dir, name))
		case strings.HasPrefix(name, "MANIFEST-"):
			sf.manifest = name
		}
	}
	if sf.manifest == "" {
		return fmt.Errorf("store %s: its live files %q have no manifest", s.dir, names)
	}
	var f *os.File
	if f, err = os.Open(filepath.Join(s.dir, sf.manifest)); err == nil {
		sf.content = make([]byte, manifestSize)
		_, err = io.ReadFull(f, sf.content)
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("store %s: reading %d bytes of its manifest: %w", s.dir, manifestSize, err)
	}
	var listed = time.Now()
	if sf.sources, err = src.Sources(ctx, paths...); err != nil {
		return fmt.Errorf("store %s: its files in its recovery log: %w", s.dir, err)
	}
	var sourced = time.Now()
	if err = fn(sf); err != nil {
		return err
	}
	slog.Debug("store shared its files", "store", s.dir, "tables", len(sf.tables), "manifest", len(sf.content),
		"flushedNow", flush, "flush", listed.Sub(began), "durable", sourced.Sub(listed), "linked", time.Since(sourced))
	return nil
}

// Forked flushes the memtable, in the background, once a commit whose
// checkpoint new shards fork from is applied (txnkv.ForkNotified): a new
// shard linking the store's files waits for that flush, which holds the
// split, rather than flushing the memtable again with what was written
// since.
func (d *database) Forked() {
	var f = &forkFlush{done: make(chan struct{})}
	d.forkFlush.Store(f)
	d.tasks.Go(func() {
		defer close(f.done)
		var fo = grocksdb.NewDefaultFlushOptions()
		defer fo.Destroy()
		fo.SetWait(true)
		if f.err = d.db.Flush(fo); f.err != nil {
			slog.Warn("flushing the memtable of a store split for a rescale", "store", d.dir, "err", f.err)
		}
	})
}

// forkFlush is the flush of the memtable begun by Forked.
type forkFlush struct {
	done chan struct{} // Closed once it's done.
	err  error         // Set before done is closed.
}

var _ txnkv.ForkNotified = (*database)(nil)

// liveFiles returns the names of the live files of cdb, its memtable
// flushed first if flush, and the size of its manifest through the version
// they are of.
func liveFiles(cdb unsafe.Pointer, flush bool) ([]string, int64, error) {
	var names *C.char
	var n C.size_t
	var size C.uint64_t
	var f C.int
	if flush {
		f = 1
	}
	if msg := C.gc_live_files(cdb, f, &names, &n, &size); msg != nil {
		return nil, 0, cError(msg)
	}
	defer C.free(unsafe.Pointer(names))
	var out []string
	for _, l := range strings.Split(C.GoStringN(names, C.int(n)), "\n") {
		if l = strings.TrimPrefix(l, "/"); l != "" {
			out = append(out, l)
		}
	}
	return out, int64(size), nil
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
