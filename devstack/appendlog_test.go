package devstack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// Records written concurrently, synced, across many segments, read back
// complete and in each journal's order; a torn tail is where a segment ends.
func TestAppendLogRecordsConcurrentlyAcrossSegments(t *testing.T) {
	var dir = t.TempDir()
	var l, err = openAppendLog(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	l.segmentSize = 4 << 10 // Many rotations.
	const writers, perWriter = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			var journal = pb.Journal(fmt.Sprintf("j/%d", w))
			var offset pb.Offset
			for i := range perWriter {
				var content = fmt.Appendf(nil, "record %d of writer %d\n", i, w)
				if err := l.record(appendRecord{Journal: journal, Begin: offset, End: offset + int64(len(content)), Content: content}); err != nil {
					t.Error(err)
					return
				}
				offset += int64(len(content))
			}
		})
	}
	wg.Wait()
	if err = l.close(false); err != nil {
		t.Fatal(err)
	}
	segs, err := appendLogSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) < 10 {
		t.Fatalf("%d segments: the log did not rotate", len(segs))
	}
	var next = map[pb.Journal]pb.Offset{}
	var n int
	for _, seg := range segs {
		if err = readAppendSegment(seg.path, func(rec appendRecord) error {
			if rec.Begin != next[rec.Journal] {
				return fmt.Errorf("journal %s: record at %d, want %d", rec.Journal, rec.Begin, next[rec.Journal])
			}
			next[rec.Journal] = rec.End
			n++
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n != writers*perWriter {
		t.Fatalf("read %d records, want %d", n, writers*perWriter)
	}

	// A torn record (the process died writing it) ends its segment.
	l2, err := openAppendLog(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	if err = l2.record(appendRecord{Journal: "j/x", Begin: 0, End: 3, Content: []byte("abc")}); err != nil {
		t.Fatal(err)
	}
	l2.mu.Lock()
	_, _ = l2.f.Write([]byte("gzal\x40\x00\x00\x00torn"))
	var path = l2.f.Name()
	l2.mu.Unlock()
	var got []string
	if err = readAppendSegment(path, func(rec appendRecord) error {
		got = append(got, string(rec.Content))
		return nil
	}); err != nil || len(got) != 1 || got[0] != "abc" {
		t.Fatalf("read %q (%v) from a segment with a torn tail", got, err)
	}
	if err = l2.close(false); err != nil {
		t.Fatal(err)
	}
}

// readStream is a Journal_ReadServer which records what it is sent.
type readStream struct {
	pb.Journal_ReadServer
	ctx  context.Context
	sent []*pb.ReadResponse
}

func (s *readStream) Context() context.Context { return s.ctx }
func (s *readStream) Send(r *pb.ReadResponse) error {
	s.sent = append(s.sent, r)
	return nil
}

// Content of a persisted fragment is sent at once, though the log holds
// none of it (as after a restart that took the journal's head for less):
// it survives a crash without the log. Content of a spool waits for it.
func TestReadsOfPersistedFragmentsDoNotWait(t *testing.T) {
	var l, err = openAppendLog(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close(true)
	l.setLogged("j", 0, true)

	var ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	var out = &readStream{ctx: ctx}
	var s = &loggedReadStream{Journal_ReadServer: out, log: l, journal: "j"}
	var persisted = &pb.ReadResponse{Offset: 0, WriteHead: 6, Fragment: &pb.Fragment{Journal: "j", Begin: 0, End: 6, BackingStore: "file:///"}}
	for _, r := range []*pb.ReadResponse{persisted, {Offset: 0, Content: []byte("hello\n")}} {
		if err = s.Send(r); err != nil {
			t.Fatalf("sending content of a persisted fragment: %v", err)
		}
	}
	if len(out.sent) != 2 {
		t.Fatalf("sent %d responses", len(out.sent))
	}
	// A spool's content past what the log holds waits (here until the
	// stream's context ends).
	var spool = &pb.ReadResponse{Offset: 6, WriteHead: 12, Fragment: &pb.Fragment{Journal: "j", Begin: 6, End: 12}}
	if err = s.Send(spool); err != nil {
		t.Fatal(err)
	}
	if err = s.Send(&pb.ReadResponse{Offset: 6, Content: []byte("world\n")}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("sending content of a spool the log lacks: %v", err)
	}
}

// A new segment's entry in the log's directory is synced before an append
// logged in it is acknowledged: else a crash of the machine could lose the
// whole segment, though its records were synced.
func TestNewSegmentsAreSyncedIntoTheirDirectory(t *testing.T) {
	var dir = t.TempDir()
	var l, err = openAppendLog(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close(false)
	var first = l.f.Name() // Created before the syncs were watched.
	var mu sync.Mutex
	var inDir = map[string]bool{} // Segments present at a sync of dir.
	l.fsync = func(f *os.File) error {
		if fi, err := f.Stat(); err == nil && fi.IsDir() && f.Name() == dir {
			var entries, _ = os.ReadDir(dir)
			mu.Lock()
			for _, e := range entries {
				inDir[filepath.Join(dir, e.Name())] = true
			}
			mu.Unlock()
		}
		return f.Sync()
	}
	l.segmentSize = 256
	var offset pb.Offset
	for i := range 50 {
		var content = fmt.Appendf(nil, "record %d\n", i)
		if err = l.record(appendRecord{Journal: "j", Begin: offset, End: offset + int64(len(content)), Content: content}); err != nil {
			t.Fatal(err)
		}
		offset += int64(len(content))
		// Every segment an acknowledged record may be in was synced into dir.
		segs, err := appendLogSegments(dir)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for _, s := range segs {
			if s.path != first && !inDir[s.path] {
				t.Fatalf("record %d acknowledged; segment %s was never synced into its directory", i, filepath.Base(s.path))
			}
		}
		mu.Unlock()
	}
	if segs, _ := appendLogSegments(dir); len(segs) < 5 {
		t.Fatalf("%d segments: the log did not rotate", len(segs))
	}
}

// Content is readable once its record is on disk, not merely written: a
// reader must not see, and act on, content a crash of the machine loses.
func TestReadersWaitForTheSync(t *testing.T) {
	var l, err = openAppendLog(t.TempDir(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close(false)
	l.setLogged("j", 0, true)
	var syncing, release = make(chan struct{}, 1), make(chan struct{})
	l.fsync = func(f *os.File) error {
		select {
		case syncing <- struct{}{}:
		default:
		}
		<-release
		return f.Sync()
	}
	var recorded = make(chan error, 1)
	go func() {
		recorded <- l.record(appendRecord{Journal: "j", Begin: 0, End: 6, Content: []byte("hello\n")})
	}()
	<-syncing // Written, and being synced.

	var ctx, cancel = context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err = l.waitDurable(ctx, "j", 6); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a reader waiting for content written but not yet synced: %v, want it to wait", err)
	}
	close(release)
	if err = <-recorded; err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err = l.waitDurable(ctx, "j", 6); err != nil {
		t.Fatalf("a reader waiting for synced content: %v", err)
	}

	// A log that does not sync (UnsafeNoFsync) has content readable once
	// written.
	u, err := openAppendLog(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer u.close(false)
	u.setLogged("j", 0, true)
	if err = u.record(appendRecord{Journal: "j", Begin: 0, End: 6, Content: []byte("hello\n")}); err != nil {
		t.Fatal(err)
	}
	if err = u.waitDurable(ctx, "j", 6); err != nil {
		t.Fatalf("a reader of a log that does not sync: %v", err)
	}
}

// The log keeps every append the fragment store does not hold: a fragment
// persisted past one not yet persisted (the persister writes fragments in
// no set order) does not let it drop the appends before it.
func TestPruneKeepsAppendsBeforeAGapInPersistedFragments(t *testing.T) {
	var frag = func(begin, end pb.Offset, persisted bool) pb.FragmentsResponse__Fragment {
		var f = pb.FragmentsResponse__Fragment{Spec: pb.Fragment{Journal: "j", Begin: begin, End: end}}
		if persisted {
			f.Spec.BackingStore = "file:///"
		}
		return f
	}
	for _, tc := range []struct {
		name      string
		fragments []pb.FragmentsResponse__Fragment
		want      pb.Offset
	}{
		{"none", nil, 0},
		{"all persisted", []pb.FragmentsResponse__Fragment{frag(0, 100, true), frag(100, 200, true)}, 200},
		{"a gap", []pb.FragmentsResponse__Fragment{frag(0, 100, true), frag(100, 200, false), frag(200, 300, true)}, 100},
		{"a hole", []pb.FragmentsResponse__Fragment{frag(0, 100, true), frag(200, 300, true)}, 100},
		{"first not persisted", []pb.FragmentsResponse__Fragment{frag(0, 100, false), frag(100, 200, true)}, 0},
		{"out of order", []pb.FragmentsResponse__Fragment{frag(200, 300, true), frag(100, 200, false), frag(0, 100, true)}, 100},
		{"overlapping", []pb.FragmentsResponse__Fragment{frag(0, 100, true), frag(50, 150, true), frag(150, 160, false)}, 150},
		{"beginning past 0 (earlier ones deleted)", []pb.FragmentsResponse__Fragment{frag(500, 600, true), frag(600, 700, false)}, 600},
	} {
		if got := persistedPrefixEnd(tc.fragments); got != tc.want {
			t.Errorf("%s: persisted through %d, want %d", tc.name, got, tc.want)
		}
	}

	// Segments holding [0, 100), [100, 200) and [200, 300), with [100, 200)
	// not yet persisted: only the first segment goes.
	var dir = t.TempDir()
	var l, err = openAppendLog(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close(false)
	// inSegment records rec alone in a segment.
	var inSegment = func(rec appendRecord) {
		t.Helper()
		if err := l.record(rec); err != nil {
			t.Fatal(err)
		}
		l.mu.Lock()
		var err = l.rotateLocked()
		l.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	for begin := pb.Offset(0); begin < 300; begin += 100 {
		inSegment(appendRecord{Journal: "j", Begin: begin, End: begin + 100, Content: make([]byte, 100)})
	}
	var fragments = []pb.FragmentsResponse__Fragment{frag(0, 100, true), frag(100, 200, false), frag(200, 300, true)}
	var persistedEnd = func(context.Context, pb.Journal) (pb.Offset, error) { return persistedPrefixEnd(fragments), nil }
	var segments = func() int {
		var segs, err = appendLogSegments(dir)
		if err != nil {
			t.Fatal(err)
		}
		return len(segs)
	}
	if err = l.prune(context.Background(), persistedEnd); err != nil {
		t.Fatal(err)
	}
	if n := segments(); n != 3 { // Two closed, and the current.
		t.Fatalf("%d segments left after pruning past [0, 100), want 3: the one of [100, 200), not yet persisted, is gone", n)
	}
	fragments[1].Spec.BackingStore = "file:///"
	if err = l.prune(context.Background(), persistedEnd); err != nil {
		t.Fatal(err)
	}
	if n := segments(); n != 1 {
		t.Fatalf("%d segments left once everything was persisted, want only the current one", n)
	}

	// A segment holding the tail of an idle journal "idle", never
	// persisted, then segments of "j" alone, persisted, and of "gone",
	// deleted: those go, the idle one's stays.
	inSegment(appendRecord{Journal: "idle", Begin: 0, End: 10, Content: make([]byte, 10)})
	inSegment(appendRecord{Journal: "j", Begin: 300, End: 400, Content: make([]byte, 100)})
	inSegment(appendRecord{Journal: "gone", Begin: 0, End: 100, Content: make([]byte, 100)})
	fragments = append(fragments, frag(300, 400, true))
	persistedEnd = func(_ context.Context, journal pb.Journal) (pb.Offset, error) {
		switch journal {
		case "idle":
			return 0, nil
		case "gone":
			return 0, client.ErrJournalNotFound
		default:
			return persistedPrefixEnd(fragments), nil
		}
	}
	if err = l.prune(context.Background(), persistedEnd); err != nil {
		t.Fatal(err)
	}
	if n := segments(); n != 2 {
		t.Fatalf("%d segments left, want 2: the idle journal's and the current one", n)
	}
}
