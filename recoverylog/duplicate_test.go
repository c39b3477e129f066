package recoverylog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// A broker may commit an append whose acknowledgement is then lost: the
// journal client appends it again, and the log holds its bytes twice, back
// to back. These tests make such logs on the real broker stack, in both of
// the shapes a recorder can see: a copy of its last append lies before its
// next append (made here behind the recorder's back), or before the very
// append the broker acknowledges (made by holding the recorder's append back
// until its copy is in the log, as a retry after a lost acknowledgement is).

// gatedClient is a journal client which holds back the next append it
// starts until a gate resolves, should a gate be armed.
type gatedClient struct {
	client.AsyncJournalClient
	mu   sync.Mutex
	gate client.OpFuture
}

// StartAppend starts an append which also waits for the armed gate, if any.
func (g *gatedClient) StartAppend(req pb.AppendRequest, deps client.OpFutures) *client.AsyncAppend {
	g.mu.Lock()
	var gate = g.gate
	g.gate = nil
	g.mu.Unlock()
	if gate != nil {
		var d = make(client.OpFutures, len(deps)+1)
		maps.Copy(d, deps)
		d[gate] = struct{}{}
		deps = d
	}
	return g.AsyncJournalClient.StartAppend(req, deps)
}

func (g *gatedClient) arm(gate client.OpFuture) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = gate
}

// newGatedMirror is newMirror, with a recorder whose appends go through a
// gatedClient.
func newGatedMirror(t testing.TB, journal pb.Journal, hints *Hints, author Author) (*mirror, *gatedClient) {
	t.Helper()
	var fsm, dir, _ = play(t, journal, hints, author)
	var ctx, cancel = context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var g = &gatedClient{AsyncJournalClient: client.NewAppendService(ctx, stack.Journals())}
	var rec, err = NewRecorder(journal, fsm, author, dir, g)
	if err != nil {
		t.Fatal(err)
	}
	return &mirror{t: t, dir: dir, rec: rec, fns: make(map[string]Fnode)}, g
}

// readLog returns the log's bytes [begin, end).
func readLog(t testing.TB, journal pb.Journal, begin, end int64) []byte {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var b = make([]byte, end-begin)
	var rr = client.NewRetryReader(ctx, stack.Journals(), pb.ReadRequest{Journal: journal, Offset: begin, EndOffset: end})
	if _, err := io.ReadFull(rr, b); err != nil {
		t.Fatalf("reading %s [%d, %d): %v", journal, begin, end, err)
	}
	return b
}

// appendRaw appends b to journal behind any recorder's back, and returns
// where it committed.
func appendRaw(t testing.TB, journal pb.Journal, b []byte) logRange {
	t.Helper()
	var resp, err = client.Append(context.Background(), stack.Journals(), pb.AppendRequest{Journal: journal}, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return logRange{resp.Commit.Begin, resp.Commit.End}
}

// lastCommit waits for every op m's recorder recorded to commit, and
// returns where its last append committed.
func (m *mirror) lastCommit() logRange {
	m.t.Helper()
	m.check(m.rec.SyncAll(context.Background()))
	m.rec.mu.Lock()
	defer m.rec.mu.Unlock()
	if m.rec.last == nil {
		m.t.Fatal("the recorder appended nothing")
	}
	var c = m.rec.last.Response().Commit
	return logRange{c.Begin, c.End}
}

// duplicateLast appends copies of the bytes of the recorder's last append,
// read from the log, just after it, as a broker which lost the
// acknowledgement of the append and took it again would. It returns where
// the copies lie.
func (m *mirror) duplicateLast(copies int) logRange {
	m.t.Helper()
	var journal = m.rec.Journal()
	var last = m.lastCommit()
	var content = readLog(m.t, journal, last.begin, last.end)
	var at = last.end
	if head := writeHead(m.t, journal); head != at {
		at = head // After copies made before, which the recorder hasn't seen yet.
	}
	for range copies {
		if got := appendRaw(m.t, journal, content); got.begin != at {
			m.t.Fatalf("copy of [%d, %d) committed at %v, not just after it at %d", last.begin, last.end, got, at)
		} else {
			at = got.end
		}
	}
	return logRange{last.end, at}
}

// flushWithLostAck flushes the ops m's recorder gathered in an append which
// the broker commits copies+1 times, as when it loses the acknowledgement of
// the first commits and the journal client retries: the append's copies lie
// just before the commit it acknowledges. Other goroutines may record
// meanwhile. It returns where the copies lie.
func (m *mirror) flushWithLostAck(g *gatedClient, copies int) logRange {
	m.t.Helper()
	var r, ok = m.tryFlushWithLostAck(g, copies)
	if !ok {
		m.t.Fatal("no gathered ops to flush")
	}
	return r
}

// tryFlushWithLostAck is flushWithLostAck, which does nothing and returns
// false if the recorder gathered no ops.
func (m *mirror) tryFlushWithLostAck(g *gatedClient, copies int) (logRange, bool) {
	m.t.Helper()
	var journal = m.rec.Journal()
	var gate = client.NewAsyncOperation()

	m.rec.mu.Lock()
	var content, prev = bytes.Clone(m.rec.buf), m.rec.last
	if len(content) == 0 {
		m.rec.mu.Unlock()
		return logRange{}, false
	}
	g.arm(gate)
	var err = m.rec.flushLocked(nil)
	var aa = m.rec.last
	if err == nil {
		// Chain an empty append after aa, so that later flushes batch into
		// it rather than into aa, whose copies are then of content alone.
		err = m.rec.flushLocked(client.OpFutures{client.FinishedOperation(nil): {}})
	}
	m.rec.mu.Unlock()
	m.check(err)

	if prev != nil {
		<-prev.Done() // Appends commit in order: the gated one is next.
	}
	var copiesAt = writeHead(m.t, journal)
	for range copies {
		appendRaw(m.t, journal, content)
	}
	gate.Resolve(nil)
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m.check(m.rec.await(ctx, aa))

	var commit = aa.Response().Commit
	var want = copiesAt + int64(copies*len(content))
	if commit.Begin != want || commit.End != want+int64(len(content)) {
		m.t.Fatalf("append of %d bytes after %d copies at %d committed at [%d, %d); want [%d, %d)",
			len(content), copies, copiesAt, commit.Begin, commit.End, want, want+int64(len(content)))
	}
	return logRange{copiesAt, commit.Begin}, true
}

// checkHintsAtHead fails t unless h ends at the log's write head.
func checkHintsAtHead(t testing.TB, journal pb.Journal, h *Hints) {
	t.Helper()
	if head := writeHead(t, journal); h.NextOffset != head {
		t.Fatalf("hints end at %d, not at the write head %d", h.NextOffset, head)
	}
}

// checkSegmentsPast fails t unless no segment of h begins within copies.
func checkSegmentsPast(t testing.TB, h *Hints, copies logRange) {
	t.Helper()
	for _, ln := range h.LiveNodes {
		for _, s := range ln.Segments {
			if s.FirstOffset >= copies.begin && s.FirstOffset < copies.end {
				t.Fatalf("segment %v of node %d begins within the copies [%d, %d)", s, ln.Fnode, copies.begin, copies.end)
			}
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// captureWarnings directs slog's warnings to the returned buffer until t ends.
func captureWarnings(t testing.TB) *syncBuffer {
	var buf = new(syncBuffer)
	var prev = slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return buf
}

// A copy of the recorder's last append, just after it, doesn't fail the
// recorder: it records on, its hints skip the copy and end at the write
// head, and the log plays back, from them and from its start.
func TestRecorderSkipsCopyOfItsLastAppend(t *testing.T) {
	var warnings = captureWarnings(t)
	var journal = newLog(t)
	var m = newMirror(t, journal, nil, 0xA1)
	m.create("one")
	m.write("one", []byte("before the copy"), -1)
	m.property("CURRENT", []byte("v1"))
	var copies = m.duplicateLast(1)

	m.write("one", []byte(", after it"), -1)
	m.create("two")
	m.write("two", bytes.Repeat([]byte("two"), 1000), -1)
	m.check(m.rec.SyncAll(context.Background())) // Finds the copy, past which these ops lie.
	m.rename("two", "three")
	m.write("three", []byte("more"), -1)
	m.property("CURRENT", []byte("v2"))
	var hints = m.hints()
	checkHintsAtHead(t, journal, hints)
	checkSegmentsPast(t, hints, copies)

	var want = fmt.Sprintf("journal=%s", journal)
	if w := warnings.String(); !strings.Contains(w, "more than once") || !strings.Contains(w, want) ||
		!strings.Contains(w, fmt.Sprintf("copiesBegin=%d copiesEnd=%d", copies.begin, copies.end)) {
		t.Fatalf("warnings %q; want one naming %s and the copies %v", w, want, copies)
	}
	var _, fromHints, _ = play(t, journal, hints, 0xB2)
	sameTree(t, m.dir, fromHints)
	var _, fromStart, _ = play(t, journal, nil, 0xB3)
	sameTree(t, m.dir, fromStart)
}

// An append whose acknowledgement was lost commits after its own copies,
// which the recorder skips: its ops are in the commit it was acknowledged.
func TestRecorderSkipsCopiesOfAnAppendWithLostAcknowledgement(t *testing.T) {
	for _, copies := range []int{1, 2} {
		t.Run(fmt.Sprintf("copies=%d", copies), func(t *testing.T) {
			var journal = newLog(t)
			var m, g = newGatedMirror(t, journal, nil, 0xA1)
			m.create("one")
			m.write("one", []byte("committed once"), -1)
			m.check(m.rec.SyncAll(context.Background()))
			m.write("one", []byte(", then twice"), -1)
			m.create("two")
			m.write("two", []byte("in the append which commits twice"), -1)
			var dup = m.flushWithLostAck(g, copies)
			m.rec.mu.Lock()
			var offset = m.rec.offset
			m.rec.mu.Unlock()
			if head := writeHead(t, journal); offset != head {
				t.Fatalf("after the copies %v, the recorder's next op is at %d, not at the write head %d", dup, offset, head)
			}
			m.write("two", []byte(", and after it"), -1)
			m.property("CURRENT", []byte("v1"))

			var hints = m.hints()
			checkHintsAtHead(t, journal, hints)
			checkSegmentsPast(t, hints, dup)
			var _, fromHints, _ = play(t, journal, hints, 0xB2)
			sameTree(t, m.dir, fromHints)
			var _, fromStart, _ = play(t, journal, nil, 0xB3)
			sameTree(t, m.dir, fromStart)
		})
	}
}

// Copies amid the writes of a file lie within its segment, which a player
// reads whole, skipping their ops; positioned writes over the data on both
// sides of them play back too.
func TestCopiesAmidAFilesWrites(t *testing.T) {
	var journal = newLog(t)
	var m, g = newGatedMirror(t, journal, nil, 0xA1)
	var chunk = func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 3000+i) }
	m.create("wal")
	m.create("table")
	for i := range 4 {
		m.write("wal", chunk(i), -1)
	}
	var first = m.duplicateLast(1)
	for i := 4; i < 8; i++ {
		m.write("wal", chunk(i), -1)
		m.write("table", chunk(i), -1)
	}
	m.write("wal", []byte("over the copies' both sides"), 3000*3+100)
	var second = m.flushWithLostAck(g, 1)
	m.write("wal", chunk(8), -1)
	m.write("wal", []byte("over the second copy's both sides"), 3000*6+100)
	m.write("table", []byte("!"), 10)

	var hints = m.hints()
	checkHintsAtHead(t, journal, hints)
	checkSegmentsPast(t, hints, first)
	checkSegmentsPast(t, hints, second)
	for _, ln := range hints.LiveNodes {
		if ln.Links[0] != "wal" {
			continue
		} else if len(ln.Segments) != 1 || ln.Segments[0].FirstOffset >= first.begin || ln.Segments[0].EndOffset <= second.end {
			t.Fatalf("wal's segments %v; want one spanning the copies %v and %v", ln.Segments, first, second)
		}
	}
	var _, fromHints, _ = play(t, journal, hints, 0xB2)
	sameTree(t, m.dir, fromHints)
	var _, fromStart, _ = play(t, journal, nil, 0xB3)
	sameTree(t, m.dir, fromStart)
}

// After a copy of its append is recognized, the recorder still detects
// another writer's append, even of the very length of its last append.
func TestRecorderDetectsForeignAppendAfterCopy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		foreign func(last []byte) []byte
	}{
		{"other", func([]byte) []byte { return []byte("foreign") }},
		{"same length", func(last []byte) []byte { last = bytes.Clone(last); last[len(last)/2] ^= 1; return last }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var journal = newLog(t)
			var m = newMirror(t, journal, nil, 0xA1)
			m.create("one")
			m.write("one", []byte("data"), -1)
			m.duplicateLast(1)
			m.write("one", []byte(", more data"), -1)
			var hints = m.hints()
			checkHintsAtHead(t, journal, hints)

			var last = m.lastCommit()
			var at = appendRaw(t, journal, tc.foreign(readLog(t, journal, last.begin, last.end))).begin
			m.write("one", []byte(", and more"), -1)
			var _, err = m.rec.Hints(context.Background())
			if err == nil || !strings.Contains(err.Error(), "another writer") || !errors.Is(err, ErrCorrupt) ||
				!strings.Contains(err.Error(), journal.String()) || !strings.Contains(err.Error(), fmt.Sprintf("expected at [%d,", at)) {
				t.Fatalf("Hints after a foreign append at %d: %v; want an ErrCorrupt naming %s and the offset", at, err, journal)
			}
			if err2 := m.rec.SyncAll(context.Background()); !errors.Is(err2, ErrCorrupt) {
				t.Fatalf("the failure isn't sticky: SyncAll returned %v", err2)
			}
		})
	}
}

// Random ops over a handful of files, with copies of appends at random
// moments in both shapes, one, two or three at a time. After each round, the
// log plays back from the round's hints to what the recorder's directory
// holds, and the next round records on from that playback.
func TestCopiesOfAppendsAtRandomMoments(t *testing.T) {
	var journal = newLog(t)
	var rng = rand.New(rand.NewPCG(7, 11))
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("d%d/f%d", i%2, i))
	}
	var data = func() []byte {
		var n = rng.IntN(6 << 10)
		switch rng.IntN(40) {
		case 0:
			n = MaxWriteLen + rng.IntN(MaxWriteLen/2) // Flushed as it's recorded.
		case 1:
			n = directWriteLen - 1 + rng.IntN(3) // Either side of a direct write.
		}
		var b = make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var props = map[string]bool{}
	var hints *Hints
	var lastDir string
	var copies, lostAcks int
	for round := range 5 {
		var m, g = newGatedMirror(t, journal, hints, Author(0xA0+round))
		if lastDir != "" {
			sameTree(t, lastDir, m.dir)
		}
		var onDisk = func(name string) bool { _, err := os.Lstat(m.path(name)); return err == nil }
		var sameFile = func(a, b string) bool {
			var sa, ea = os.Stat(m.path(a))
			var sb, eb = os.Stat(m.path(b))
			return ea == nil && eb == nil && os.SameFile(sa, sb)
		}
		for range 120 {
			var name, other = names[rng.IntN(len(names))], names[rng.IntN(len(names))]
			var _, handle = m.fns[name]
			switch k := rng.IntN(10); {
			case props[name] && k < 6:
				m.remove(name)
				delete(props, name)
			case props[name]:
				m.property(name, data()[:rng.IntN(32)])
			case !onDisk(name) && k < 8, k == 9:
				if onDisk(name) {
					m.check(os.Remove(m.path(name))) // Its other links keep its content.
				}
				m.create(name) // Replaces any file there.
			case !onDisk(name):
				m.property(name, data()[:rng.IntN(32)])
				props[name] = true
			case k < 4 && handle:
				m.write(name, data(), -1)
			case k == 4 && handle:
				m.write(name, data(), rng.Int64N(8<<10))
			case k == 5 && name != other && !props[other] && !sameFile(name, other):
				m.rename(name, other)
			case k == 6 && handle && !onDisk(other):
				m.link(name, other)
			case k == 7:
				m.remove(name)
			}

			m.rec.mu.Lock()
			var gathered, appended = len(m.rec.buf) != 0, m.rec.last != nil
			m.rec.mu.Unlock()
			switch rng.IntN(12) {
			case 0:
				if appended {
					m.duplicateLast(1 + rng.IntN(3))
					copies++
				}
			case 1:
				if gathered {
					m.flushWithLostAck(g, 1+rng.IntN(3))
					lostAcks++
				}
			}
		}
		hints = m.hints()
		if head := writeHead(t, journal); hints.NextOffset > head {
			t.Fatalf("round %d: hints end at %d, past the write head %d", round, hints.NextOffset, head)
		}
		lastDir = m.dir
	}
	t.Logf("%d copies of last appends and %d lost acknowledgements", copies, lostAcks)
	if copies == 0 || lostAcks == 0 {
		t.Fatal("no copies of appends were made: test is vacuous")
	}
	var _, dir, _ = play(t, journal, hints, 0xB0)
	sameTree(t, lastDir, dir)
	_, dir, _ = play(t, journal, nil, 0xB1)
	sameTree(t, lastDir, dir)
}

// Copies of appends are recognized while other goroutines record and sync:
// their ops, framed before the copies were found, move past them.
func TestCopiesWhileRecordingConcurrently(t *testing.T) {
	var journal = newLog(t)
	var m, g = newGatedMirror(t, journal, nil, 0xA1)
	const workers, lostAcks = 4, 12
	var fns []Fnode
	for i := range workers {
		var name = fmt.Sprintf("w%d", i)
		m.create(name)
		fns = append(fns, m.fns[name])
	}
	var chunk = func(i, j int) []byte { return bytes.Repeat([]byte{byte(i), byte(j)}, 50+j%100) }
	var wg sync.WaitGroup
	var stop = make(chan struct{})
	var counts = make([]int, workers)
	for i := range workers {
		wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-stop:
					counts[i] = j
					return
				default:
				}
				if err := m.rec.Append(fns[i], chunk(i, j)); err != nil {
					t.Error(err)
				} else if j%25 == 24 {
					if err = m.rec.SyncAll(context.Background()); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	for n := 0; n < lostAcks && !t.Failed(); {
		if _, ok := m.tryFlushWithLostAck(g, 1+n%2); ok {
			n++
		} else {
			time.Sleep(100 * time.Microsecond)
		}
	}
	close(stop)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("%d lost acknowledgements amid %v appends", lostAcks, counts)
	for i := range workers {
		var b []byte
		for j := range counts[i] {
			b = append(b, chunk(i, j)...)
		}
		m.check(writeFile(m.path(fmt.Sprintf("w%d", i)), b))
	}
	var hints = m.hints()
	checkHintsAtHead(t, journal, hints)
	var _, fromHints, _ = play(t, journal, hints, 0xB2)
	sameTree(t, m.dir, fromHints)
	var _, fromStart, _ = play(t, journal, nil, 0xB3)
	sameTree(t, m.dir, fromStart)
}
