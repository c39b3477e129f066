package rocks

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/linxGnu/grocksdb"
	pb "go.gazette.dev/core/broker/protocol"
)

// A store opened on links of another's files holds the other's rows as of
// the link, those still in its memtable included, and none it commits
// after; its recovery log adopts the linked table files rather than
// holding their bytes, and played back elsewhere, after the other has
// compacted them away, it holds the same rows, and those it committed.
func TestLinkFiles(t *testing.T) {
	for _, wal := range []bool{false, true} {
		// The link flushes the parent's memtables if their logs hold more
		// than linkFlushWAL (here, anything: 0), and else has the child
		// replay the parent's logs.
		for _, flush := range []bool{false, true} {
			t.Run(fmt.Sprintf("wal=%t/flush=%t", wal, flush), func(t *testing.T) {
				if flush {
					defer func(b uint64) { linkFlushWAL = b }(linkFlushWAL)
					linkFlushWAL = 0
				}
				linkFiles(t, wal, flush)
			})
		}
	}
}

// linkFiles is TestLinkFiles, of a store whose last rows are in its
// write-ahead log and memtable (wal), or flushed; the link flushes its
// memtables (flush), or leaves them.
func linkFiles(t *testing.T, wal, flush bool) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var parentLog, childLog = newLog(t), newLog(t)
	var opts Options
	smallTune(&opts)
	var p = openRecorded(t, parentLog, 0xE1, opts)
	defer p.store.Destroy()
	for i := range 6 {
		commitRows(t, p.store, i*500, i*500+800, "parent", int64(i+1)) // Overlapping: rows rewritten.
	}
	// Those commits passed the memtable's size, and the store flushes in
	// the background as its write-ahead log does: wait for that flush, and
	// flush what it left, lest it flush the rows below after they're
	// written. The rows below then start a log that stays within its bound.
	if err := p.store.awaitFlush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.store.DB().Flush(flushOpts()); err != nil {
		t.Fatal(err)
	}
	commitRows(t, p.store, 0, 10, "memtable", 7)
	if wal {
		// Rows in the memtable, and so in the write-ahead log only, until
		// the link flushes them.
		commitRows(t, p.store, 10, 20, "wal", 7)
	} else {
		p.store.DB().Flush(flushOpts())
	}
	var want = contents(t, p.store)

	// The child's store is opened empty, then destroyed, as a replica does
	// before it links its parent's files.
	var rec, dir = playRecorder(t, childLog, 0xE2)
	empty, err := Open(dir, rec, opts)
	if err != nil {
		t.Fatal(err)
	}
	empty.Destroy()
	if err = (Opener{}).LinkFiles(ctx, p.store, rec); err != nil {
		t.Fatal(err)
	}
	// Its memtable's rows are flushed to tables by the link, or left to
	// the child to replay from the copy of its log.
	if n, ok := p.store.DB().GetIntProperty("rocksdb.num-entries-active-mem-table"); !ok || (n == 0) != (flush || !wal) {
		t.Fatalf("the parent's memtable holds %d rows after the link (%t)", n, ok)
	}
	// The parent goes on, and compacts away the files the child linked.
	commitRows(t, p.store, 0, 3000, "after", 8)
	p.store.DB().CompactRange(rangeAll())

	// It doesn't compact on its own: a compaction would rewrite the linked
	// files into its own before its hints are read.
	var childOpts = opts
	childOpts.Tune = func(ro *grocksdb.Options) {
		opts.Tune(ro)
		ro.SetDisableAutoCompactions(true)
	}
	c, err := Open(dir, rec, childOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	if got := contents(t, c); !mapsEqual(got, want) {
		t.Fatalf("the linked store holds %d rows, want the parent's %d as of the link", len(got), len(want))
	} else if cp := readThrough(t, c); cp != 7 {
		t.Fatalf("the linked store's checkpoint reads through %d, want 7", cp)
	}
	commitRows(t, c, 2000, 2100, "child", 9)
	want = contents(t, c)

	h, err := rec.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var st = recoverylog.StatsOf(h)
	t.Logf("child's hints: %+v", st)
	if st.AdoptedFiles == 0 || st.AdoptedBytes < st.HintedBytes {
		t.Fatalf("the child's log adopts %d files of %d bytes, and holds %d bytes", st.AdoptedFiles, st.AdoptedBytes, st.HintedBytes)
	}
	// Played back elsewhere, it reads the adopted files from the parent's log.
	var b = openRecorded(t, childLog, 0xE3, opts)
	if got := contents(t, b.store); !mapsEqual(got, want) {
		t.Fatalf("played back, the child's store holds %d rows, want %d", len(got), len(want))
	} else if cp := readThrough(t, b.store); cp != 9 {
		t.Fatalf("played back, the child's checkpoint reads through %d, want 9", cp)
	}

	// Compacted after a commit, as a shard is once it has dropped what it
	// doesn't own, its files are its own: its log adopts none.
	b.store.CompactAfterCommit()
	commitRows(t, b.store, 2100, 2110, "compacted", 10)
	want = contents(t, b.store)
	for {
		h, err = b.rec.Hints(ctx)
		if err != nil {
			t.Fatal(err)
		} else if recoverylog.StatsOf(h).AdoptedFiles == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after a compaction, the child's log still adopts: %+v", recoverylog.StatsOf(h))
		case <-time.After(20 * time.Millisecond):
		}
	}
	b.store.Destroy()
	var a = openRecorded(t, childLog, 0xE4, opts)
	defer a.store.Destroy()
	if got := contents(t, a.store); !mapsEqual(got, want) {
		t.Fatalf("played back after the compaction, the child's store holds %d rows, want %d", len(got), len(want))
	}
}

// A store linked to its parent's files keeps the copy of its parent's
// write-ahead log as it opens (it ends with a whole record), and the store
// linked to its files in turn copies that log, adopted in its log from its
// parent's, which adopted it from the grandparent's: played back elsewhere,
// the last store holds what it committed, read through the chain.
func TestLinkFilesOfALinkedStore(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var logs = []pb.Journal{newLog(t), newLog(t), newLog(t)}
	var p = openRecorded(t, logs[0], 0xE1, Options{})
	defer p.store.Destroy()
	commitRows(t, p.store, 0, 500, "parent", 1)
	if err := p.store.DB().Flush(flushOpts()); err != nil {
		t.Fatal(err)
	}
	commitRows(t, p.store, 400, 600, "wal", 2) // In its write-ahead log only.

	// linked links a new store of log to the files of s, opens it, and
	// checks that it holds what s does, its logs kept.
	var linked = func(s *Store, log pb.Journal, author recoverylog.Author, cp int64) *Store {
		t.Helper()
		var want = contents(t, s)
		var rec, dir = playRecorder(t, log, author)
		if err := (Opener{}).LinkFiles(ctx, s, rec); err != nil {
			t.Fatal(err)
		}
		var wals, _ = filepath.Glob(filepath.Join(dir, "*.log"))
		if len(wals) == 0 {
			t.Fatalf("the store linked to %s has no write-ahead log to replay", s.dir)
		}
		var c, err = Open(dir, rec, Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range wals {
			if _, err := os.Stat(w); err != nil {
				t.Fatalf("the linked store didn't keep its whole write-ahead log %s: %v", w, err)
			}
		}
		if got := contents(t, c); !mapsEqual(got, want) {
			t.Fatalf("the store linked to %s holds %d rows, want its %d", s.dir, len(got), len(want))
		} else if got := readThrough(t, c); got != cp {
			t.Fatalf("the store linked to %s reads through %d, want %d", s.dir, got, cp)
		}
		return c
	}
	var c = linked(p.store, logs[1], 0xE2, 2)
	defer c.Destroy()
	commitRows(t, c, 550, 650, "child", 3)
	var g = linked(c, logs[2], 0xE3, 3)
	defer g.Destroy()
	commitRows(t, g, 600, 700, "grandchild", 4)
	var want = contents(t, g)

	h, err := g.rec.FileRecorder.(*recoverylog.Recorder).Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var adoptedWAL bool
	for _, ln := range h.LiveNodes {
		adoptedWAL = adoptedWAL || (ln.Source != nil && ln.Source.Node.Source != nil && strings.HasSuffix(ln.Links[0], ".log"))
	}
	if !adoptedWAL {
		t.Fatalf("the grandchild's log adopts no write-ahead log its parent adopted: %v", h.LiveNodes)
	}
	var b = openRecorded(t, logs[2], 0xE4, Options{})
	defer b.store.Destroy()
	if got := contents(t, b.store); !mapsEqual(got, want) {
		t.Fatalf("played back, the grandchild's store holds %d rows, want %d", len(got), len(want))
	} else if cp := readThrough(t, b.store); cp != 4 {
		t.Fatalf("played back, the grandchild's checkpoint reads through %d, want 4", cp)
	}
}

// A file the database writes anew, at the name of a file linked from
// another store's directory (as a partly linked directory may hold), is a
// new file: the other's is left as it was.
func TestNewFileSparesALinkedFile(t *testing.T) {
	var a = openRecorded(t, newLog(t), 0xE5, Options{})
	defer a.store.Destroy()
	var other = filepath.Join(t.TempDir(), "other.sst")
	if err := os.WriteFile(other, []byte("the other store's file"), 0o644); err != nil {
		t.Fatal(err)
	} else if err = os.Link(other, filepath.Join(a.dir, loadFile)); err != nil {
		t.Fatal(err)
	}
	// A load writes its table file at loadFile, through the recorded file system.
	if n, err := runtime.LoadRows(a.store, rowsOf([]string{"a", "b"})); err != nil || n != 2 {
		t.Fatalf("Load: %d, %v", n, err)
	}
	if b, err := os.ReadFile(other); err != nil || string(b) != "the other store's file" {
		t.Fatalf("the linked file holds %q (%v)", b, err)
	}
}

// FlushAhead writes the memtable's rows to table files in the background,
// the rows unchanged, which awaitFlush waits for; asked again while under
// way, it begins no other; a store destroyed while it's asked waits for a
// flush under way, and begins none after.
func TestFlushAhead(t *testing.T) {
	var s, err = Open(t.TempDir(), &nopRecorder{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if err = s.Put(fmt.Appendf(nil, "row/%05d", i), fmt.Appendf(nil, "%0100d", i)); err != nil {
			t.Fatal(err)
		}
	}
	await(t, s.StartCommit(nil, checkpointAt(1), nil))
	var want = contents(t, s)
	var inMemory = func() string {
		return s.DB().GetProperty("rocksdb.num-entries-active-mem-table") + "+" + s.DB().GetProperty("rocksdb.num-entries-imm-mem-tables")
	}
	if got := inMemory(); got == "0+0" {
		t.Fatal("no rows in the memtables before the flush")
	}
	if err = s.awaitFlush(context.Background()); err != nil { // None under way.
		t.Fatal(err)
	}
	s.FlushAhead()
	s.FlushAhead()
	// A link waits for it (awaitFlush).
	var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err = s.awaitFlush(ctx); err != nil {
		t.Fatal(err)
	} else if got := inMemory(); got != "0+0" || s.flushing.Load() {
		t.Fatalf("rows in the memtables once FlushAhead's flush ended: %s (under way: %t)", got, s.flushing.Load())
	}
	if got := s.DB().GetProperty("rocksdb.num-files-at-level0"); got != "1" {
		t.Fatalf("%s table files at level 0 after two FlushAheads; want the one flush's", got)
	} else if got := contents(t, s); !mapsEqual(got, want) {
		t.Fatalf("after the flush, the store holds %d rows; want its %d", len(got), len(want))
	}

	var done = make(chan struct{})
	go func() {
		defer close(done)
		for range 1000 {
			s.FlushAhead()
		}
	}()
	s.Destroy()
	<-done
}

// A linked store replays the copy of its parent's write-ahead log as
// recorded, which may end within the record of a commit the parent was
// writing: it opens as of the commit before, flushing what it replayed,
// and opened again after commits of its own (as a recovery plays them
// back), it holds those too. A copy which ends with a whole record is kept
// as the store opens, unflushed, and opened again the store holds its rows
// and those of its own commits after it.
func TestReplayOfALogCutMidCommit(t *testing.T) {
	for _, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("whole=%t", whole), func(t *testing.T) { replayOfACutLog(t, whole) })
	}
}

// replayOfACutLog is TestReplayOfALogCutMidCommit, of a copy of the log cut
// within a commit, or after it (whole).
func replayOfACutLog(t *testing.T, whole bool) {
	var parentDir, dir = t.TempDir(), t.TempDir()
	var p, err = Open(parentDir, &nopRecorder{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy()
	var walOf = func() (string, int64) {
		t.Helper()
		var logs, _ = filepath.Glob(filepath.Join(parentDir, "*.log"))
		if len(logs) != 1 {
			t.Fatalf("the parent has write-ahead logs %v; want one", logs)
		}
		var fi, err = os.Stat(logs[0])
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Base(logs[0]), fi.Size()
	}
	commitRows(t, p, 0, 500, "a", 1)
	var want = contents(t, p)
	var wal, before = walOf()
	commitRows(t, p, 0, 2000, "b", 2) // One record of about 250 KB, over blocks of 32 KiB.
	if _, after := walOf(); after < before+200_000 {
		t.Fatalf("the commit wrote %d bytes of log", after-before)
	} else if !whole {
		before += (after - before) / 2
	}
	files, err := os.ReadDir(parentDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		var n = before
		if f.Name() == "LOCK" || f.IsDir() {
			continue
		} else if f.Name() != wal {
			var fi, err = f.Info()
			if err != nil {
				t.Fatal(err)
			}
			n = fi.Size()
		}
		if err = copyPrefix(filepath.Join(parentDir, f.Name()), filepath.Join(dir, f.Name()), n); err != nil {
			t.Fatal(err)
		}
	}

	c, err := Open(dir, &nopRecorder{}, Options{})
	if err != nil {
		t.Fatal(err)
	} else if got := contents(t, c); !mapsEqual(got, want) {
		t.Fatalf("opened on a log cut after the first commit (whole: %t), the store holds %d rows; want the %d of that commit", whole, len(got), len(want))
	} else if cp := readThrough(t, c); cp != 1 {
		t.Fatalf("its checkpoint reads through %d, want 1", cp)
	}
	if _, err := os.Stat(filepath.Join(dir, wal)); whole != (err == nil) {
		t.Fatalf("opened on a log cut after the first commit (whole: %t), the store has the log (%v): want it kept only if whole", whole, err)
	}
	commitRows(t, c, 100, 200, "c", 3)
	commitRows(t, c, 150, 300, "d", 4)
	want = contents(t, c)
	// Closed, not destroyed, then opened again as a recovery opens it.
	c.close()
	if c, err = Open(dir, &nopRecorder{}, Options{}); err != nil {
		t.Fatal(err)
	}
	defer c.Destroy()
	if got := contents(t, c); !mapsEqual(got, want) {
		t.Fatalf("opened again, the store holds %d rows; want the %d it committed", len(got), len(want))
	} else if cp := readThrough(t, c); cp != 4 {
		t.Fatalf("opened again, its checkpoint reads through %d, want 4", cp)
	}
}

// commitRows commits rows row/FROM to row/TO (not included) of s, their
// values tagged, at checkpoint cp.
func commitRows(t testing.TB, s *Store, from, to int, tag string, cp int64) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := s.Put(fmt.Appendf(nil, "row/%05d", i), fmt.Appendf(nil, "%s-%d-%0100d", tag, i, i)); err != nil {
			t.Fatal(err)
		}
	}
	await(t, s.StartCommit(nil, checkpointAt(cp), nil))
}
