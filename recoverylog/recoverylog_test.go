package recoverylog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/protobuf/proto"
)

// Random create, write, link, unlink and rename ops over many files, recorded
// and played back from the log's start and from hints, rebuild the directory
// byte for byte.
func TestRecordAndPlayBackRandomOps(t *testing.T) {
	var journal = newLog(t)
	var m = newMirror(t, journal, nil, 0xA1)
	var rng = rand.New(rand.NewPCG(1, 2))
	var names []string
	for i := range 24 {
		names = append(names, fmt.Sprintf("d%d/f%02d", i%3, i))
	}
	var exists = func(name string) bool { _, ok := m.fns[name]; return ok }
	var data = func() []byte {
		var n = rng.IntN(8 << 10)
		switch rng.IntN(50) {
		case 0:
			n = MaxWriteLen + rng.IntN(MaxWriteLen) // Split into several Write ops.
		case 1:
			n = directWriteLen - 1 + rng.IntN(3) // Either side of a direct write.
		case 2:
			n = directWriteLen + rng.IntN(MaxWriteLen-directWriteLen)
		}
		var b = make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	var props = map[string]bool{}
	for range 600 {
		var name, other = names[rng.IntN(len(names))], names[rng.IntN(len(names))]
		switch k := rng.IntN(10); {
		case props[name]:
			m.remove(name)
			delete(props, name)
		case !exists(name) && k < 8:
			m.create(name)
		case !exists(name):
			m.property(name, data()[:rng.IntN(64)])
			props[name] = true
		case k < 5:
			m.write(name, data(), -1)
		case k == 5:
			m.write(name, data(), rng.Int64N(16<<10))
		case k == 6 && name != other && !props[other]:
			m.rename(name, other)
		case k == 7 && !exists(other) && !props[other]:
			m.link(name, other)
		case k == 8:
			m.remove(name)
		}
	}
	// Concurrent appends, as RocksDB's threads make.
	var wg sync.WaitGroup
	for i := range 4 {
		var name = fmt.Sprintf("concurrent/%d", i)
		m.create(name)
		var fn = m.fns[name]
		wg.Go(func() {
			for j := range 50 {
				if err := m.rec.Append(fn, bytes.Repeat([]byte{byte(i), byte(j)}, 100)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for i := range 4 {
		var b = make([]byte, 0, 50*200)
		for j := range 50 {
			b = append(b, bytes.Repeat([]byte{byte(i), byte(j)}, 100)...)
		}
		m.check(writeFile(m.path(fmt.Sprintf("concurrent/%d", i)), b))
	}
	var hints = m.hints()

	var _, fromStart, _ = play(t, journal, nil, 0xB2)
	sameTree(t, m.dir, fromStart)
	var _, fromHints, _ = play(t, journal, hints, 0xB3)
	sameTree(t, m.dir, fromHints)
}

// After heavy deletes, playback from hints reads a small part of the log.
func TestHintsSkipDeletedData(t *testing.T) {
	var journal = newLog(t)
	var m = newMirror(t, journal, nil, 0xA1)
	var chunk = bytes.Repeat([]byte("0123456789abcdef"), 4<<10) // 64 KiB.
	for i := range 20 {
		var name = fmt.Sprintf("%06d.sst", i)
		m.create(name)
		for range 4 {
			m.write(name, chunk, -1)
		}
		if i >= 2 {
			m.remove(fmt.Sprintf("%06d.sst", i-2))
		}
	}
	m.property("CURRENT", []byte("MANIFEST-000001\n"))
	var hints = m.hints()
	var head = writeHead(t, journal)

	var _, dir, p = play(t, journal, hints, 0xB2)
	sameTree(t, m.dir, dir)
	var ratio = float64(p.BytesRead()) / float64(head)
	t.Logf("played %d of %d log bytes (%.3f)", p.BytesRead(), head, ratio)
	if ratio > 0.15 {
		t.Fatalf("playback from hints read %.3f of the log; want at most 0.15", ratio)
	}

	// No generation of hints needs the deleted files' fragments.
	var from = NeededFrom(journal, hints)
	var frags, err = Prunable(context.Background(), stack.Journals(), journal, hints)
	if err != nil {
		t.Fatal(err)
	}
	var pruned int64
	for _, f := range frags {
		if f.End > from {
			t.Fatalf("prunable fragment %v ends past %d", f, from)
		}
		pruned += f.End - f.Begin
	}
	t.Logf("prunable: %d fragments of %d bytes; needed from %d", len(frags), pruned, from)
	if from < head/2 {
		t.Fatalf("hints need the log from %d of %d", from, head)
	}
	if frags, err = Prunable(context.Background(), stack.Journals(), journal, hints, nil); err != nil || len(frags) != 0 {
		t.Fatalf("with a generation of no hints, prunable = %v, %v; want none", frags, err)
	}
}

// A hot standby tails a live recorder, then finishes and becomes the writer;
// the deposed recorder's appends fail at the broker, and the log stays valid.
func TestHotStandbyHandoff(t *testing.T) {
	var journal = newLog(t)
	var a = newMirror(t, journal, nil, 0xA1)
	a.create("one")
	a.write("one", []byte("hello"), -1)

	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var standbyDir = t.TempDir()
	var standby = NewPlayer(stack.Journals(), journal, standbyDir, 0xB2)
	type result struct {
		fsm *FSM
		err error
	}
	var done = make(chan result, 1)
	go func() {
		var fsm, err = standby.Play(ctx, nil)
		done <- result{fsm, err}
	}()

	for i := range 20 {
		a.write("one", []byte(fmt.Sprintf(" %d", i)), -1)
		a.create(fmt.Sprintf("f%d", i))
	}
	a.property("CURRENT", []byte("v1"))
	var barrier = a.rec.Barrier(nil)
	<-barrier.Done()
	if err := barrier.Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		t.Fatalf("standby returned before finishing: %v", r.err)
	case <-standby.Tailing():
	}
	select {
	case r := <-done:
		t.Fatalf("standby returned before finishing: %v", r.err)
	case <-time.After(200 * time.Millisecond):
	}
	standby.FinishAtWriteHead()
	var r = <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	sameTree(t, a.dir, standbyDir)

	// The deposed recorder's next append fails.
	if err := a.rec.SetProperty("CURRENT", []byte("v2")); err != nil {
		t.Fatal(err) // Recorded, not yet appended.
	}
	if err := a.rec.SyncAll(ctx); !isRegisterMismatch(err) {
		t.Fatalf("deposed recorder's Sync: %v; want REGISTER_MISMATCH", err)
	}
	if err := a.rec.Append(a.fns["one"], []byte("more")); !isRegisterMismatch(err) {
		t.Fatalf("deposed recorder's Append: %v; want REGISTER_MISMATCH", err)
	}
	var barrier2 = a.rec.Barrier(nil)
	<-barrier2.Done()
	if !isRegisterMismatch(barrier2.Err()) {
		t.Fatalf("deposed recorder's Barrier: %v", barrier2.Err())
	}

	// The standby records on, and the log plays back to its directory.
	var appends = client.NewAppendService(ctx, stack.Journals())
	var rec, err = NewRecorder(journal, r.fsm, 0xB2, standbyDir, appends)
	if err != nil {
		t.Fatal(err)
	}
	var b = &mirror{t: t, dir: standbyDir, rec: rec, fns: map[string]Fnode{}}
	b.create("two")
	b.write("two", []byte("after handoff"), -1)
	b.remove("f3")
	b.property("CURRENT", []byte("v3"))
	// Hints go through etcd, as the runtime stores them after commits.
	var key = stack.Name("/test/hints/" + t.Name()) // Anew in each run of go test -count=N.
	if err = StoreHints(ctx, stack.Etcd(), key, b.hints(), 3); err != nil {
		t.Fatal(err)
	}
	stored, err := FetchHints(ctx, stack.Etcd(), key, 3)
	if err != nil {
		t.Fatal(err)
	}
	var _, dir, _ = play(t, journal, stored[0], 0xC3)
	sameTree(t, standbyDir, dir)
	_, dir, _ = play(t, journal, nil, 0xC4)
	sameTree(t, standbyDir, dir)
}

// Corrupt bytes in the log fail playback with an error naming the journal
// and the offset; so does an op truncated at the write head.
func TestCorruptLog(t *testing.T) {
	for _, tc := range []struct {
		name    string
		garbage func(frame []byte) []byte
		want    string
	}{
		{"garbage", func([]byte) []byte { return []byte("this is not an op frame, not at all") }, "op length"},
		{"flipped", func(f []byte) []byte { f = bytes.Clone(f); f[len(f)-3] ^= 0x10; return f }, "checksum mismatch"},
		{"truncated", func(f []byte) []byte { return f[:len(f)-4] }, "truncated op"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var journal = newLog(t)
			var m = newMirror(t, journal, nil, 0xA1)
			m.create("one")
			m.write("one", []byte("good data"), -1)
			m.check(m.rec.SyncAll(context.Background()))
			var head = writeHead(t, journal)

			var frame, _, _ = appendFrame(nil, &Op{
				Seq: m.rec.fsm.NextSeq(), Checksum: m.rec.fsm.NextChecksum(), Author: 0xA1,
				Kind: &Op_Write{Write: &Write{Fnode: uint64(m.fns["one"]), Length: 4, DataCrc32C: crc32Of([]byte("evil"))}},
			}, []byte("evil"))
			if _, err := client.Append(context.Background(), stack.Journals(),
				pb.AppendRequest{Journal: journal}, bytes.NewReader(tc.garbage(frame))); err != nil {
				t.Fatal(err)
			}
			var p = NewPlayer(stack.Journals(), journal, t.TempDir(), 0xB2)
			p.FinishAtWriteHead()
			var _, err = p.Play(context.Background(), nil)
			var want = fmt.Sprintf("journal %s offset %d", journal, head)
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Play: %v; want an ErrCorrupt naming %q and %q", err, want, tc.want)
			}
		})
	}
}

// The recorder detects another writer's appends, which invalidate its
// offsets, and fails rather than write wrong hints.
func TestRecorderDetectsForeignAppend(t *testing.T) {
	var journal = newLog(t)
	var m = newMirror(t, journal, nil, 0xA1)
	m.create("one")
	m.check(m.rec.SyncAll(context.Background()))
	if _, err := client.Append(context.Background(), stack.Journals(),
		pb.AppendRequest{Journal: journal}, strings.NewReader("foreign")); err != nil {
		t.Fatal(err)
	}
	m.write("one", []byte("data"), -1)
	if _, err := m.rec.Hints(context.Background()); err == nil || !strings.Contains(err.Error(), "another writer") {
		t.Fatalf("Hints after a foreign append: %v", err)
	}
}

// Hints are stored with older generations as backups; a missing key reads as
// no hints.
func TestHintsGenerations(t *testing.T) {
	needStack(t)
	var ctx = context.Background()
	var key = stack.Name("/test/hints/" + t.Name()) // Anew in each run of go test -count=N.
	var got, err = FetchHints(ctx, stack.Etcd(), key, 3)
	if err != nil || len(got) != 3 || got[0] != nil || got[1] != nil || got[2] != nil {
		t.Fatalf("FetchHints of a missing key: %v, %v", got, err)
	}
	for i := range 5 {
		var h = &Hints{Log: "logs/x", NextSeq: uint64(i + 1), NextOffset: int64(i * 100)}
		if err = StoreHints(ctx, stack.Etcd(), key, h, 3); err != nil {
			t.Fatal(err)
		}
	}
	if got, err = FetchHints(ctx, stack.Etcd(), key, 4); err != nil {
		t.Fatal(err)
	}
	for g, want := range []uint64{5, 4, 3} {
		if got[g] == nil || got[g].NextSeq != want {
			t.Fatalf("generation %d = %v; want next seq %d", g, got[g], want)
		}
	}
	if got[3] != nil {
		t.Fatalf("generation 3 = %v; want none kept", got[3])
	}
	if _, err = stack.Etcd().Put(ctx, key, "garbage"); err != nil {
		t.Fatal(err)
	}
	if _, err = FetchHints(ctx, stack.Etcd(), key, 1); err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("FetchHints of garbage: %v", err)
	}
}

func TestPlayerCancel(t *testing.T) {
	var journal = newLog(t)
	var ctx, cancel = context.WithCancel(context.Background())
	var p = NewPlayer(stack.Journals(), journal, t.TempDir(), 0xB2)
	var done = make(chan error)
	go func() { _, err := p.Play(ctx, nil); done <- err }()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Play after cancel: %v", err)
	}
}

// Hints which don't match the log fail playback; they never play wrong files.
func TestHintsOfAnotherLog(t *testing.T) {
	var journal = newLog(t)
	var m = newMirror(t, journal, nil, 0xA1)
	m.create("one")
	m.write("one", bytes.Repeat([]byte("x"), 100<<10), -1)
	m.create("two")
	m.write("two", []byte("two"), -1)
	var hints = m.hints()

	// The same hints, for a log which is shorter, or which holds other ops.
	var empty, other = newLog(t), newLog(t)
	var o = newMirror(t, other, nil, 0xA1)
	o.create("one")
	o.write("one", bytes.Repeat([]byte("y"), 200<<10), -1)
	o.create("two")
	o.write("two", []byte("two"), -1)
	m.check(o.rec.SyncAll(context.Background()))

	for journal, want := range map[pb.Journal]string{empty: "beyond the write head", other: "crosses the end"} {
		var h = proto.Clone(hints).(*Hints)
		h.Log = journal.String()
		var p = NewPlayer(stack.Journals(), journal, t.TempDir(), 0xB2)
		p.FinishAtWriteHead()
		if _, err := p.Play(context.Background(), h); err == nil || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), journal.String()) || !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Play of %s with hints of another log: %v; want %q", journal, err, want)
		}
	}
}

// Two players which finish at once both fence the log, one after the other:
// only the last one's recorder may append, and the log stays valid.
func TestConcurrentTakeovers(t *testing.T) {
	var journal = newLog(t)
	var a = newMirror(t, journal, nil, 0xA1)
	a.create("one")
	a.write("one", []byte("hello"), -1)
	a.check(a.rec.SyncAll(context.Background()))

	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var authors = []Author{0xB2, 0xC3}
	var fsms = make([]*FSM, 2)
	var dirs = []string{t.TempDir(), t.TempDir()}
	var errs = make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			var p = NewPlayer(stack.Journals(), journal, dirs[i], authors[i])
			p.FinishAtWriteHead()
			fsms[i], errs[i] = p.Play(ctx, nil)
		})
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		sameTree(t, a.dir, dirs[i])
	}
	// Try both recorders: exactly one is still the writer.
	var writers []int
	for i := range 2 {
		var rec, err = NewRecorder(journal, fsms[i], authors[i], dirs[i], client.NewAppendService(ctx, stack.Journals()))
		if err != nil {
			t.Fatal(err)
		}
		var mi = &mirror{t: t, dir: dirs[i], rec: rec, fns: map[string]Fnode{}}
		mi.property("WRITER", []byte(authors[i].String()))
		switch err = rec.SyncAll(ctx); {
		case err == nil:
			writers = append(writers, i)
		case !isRegisterMismatch(err):
			t.Fatalf("recorder %s: %v", authors[i], err)
		}
	}
	if len(writers) == 1 {
		var _, dir, _ = play(t, journal, nil, 0xD4)
		sameTree(t, dirs[writers[0]], dir)
	}
	if len(writers) != 1 {
		t.Fatalf("recorders %v could append; want exactly one", writers)
	}
}

// A player played through one write head and then on, through later ones
// (as a fork that found its parent not yet split plays on), holds the
// directory as of each, as a player played through it at once does: its
// files, closed between plays, are opened again by their links.
func TestPlayOnThroughLaterHeads(t *testing.T) {
	var journal = newLog(t)
	var m = newMirror(t, journal, nil, 0xA4)
	var rng = rand.New(rand.NewPCG(4, 5))
	var names []string
	for i := range 12 {
		names = append(names, fmt.Sprintf("d%d/f%02d", i%2, i))
	}
	var exists = func(name string) bool { _, ok := m.fns[name]; return ok }
	type phase struct {
		head int64
		tree map[string][]byte
	}
	var phases []phase
	var hints *Hints
	for i := range 6 {
		for range 80 {
			var name, other = names[rng.IntN(len(names))], names[rng.IntN(len(names))]
			switch k := rng.IntN(8); {
			case !exists(name):
				m.create(name)
			case k < 4:
				var b = make([]byte, rng.IntN(4<<10))
				for j := range b {
					b[j] = byte(rng.Uint32())
				}
				m.write(name, b, -1)
			case k == 4 && name != other:
				m.rename(name, other)
			case k == 5 && !exists(other):
				m.link(name, other)
			case k == 6:
				m.remove(name)
			}
		}
		var h = m.hints()
		if i == 1 {
			hints = h
		}
		phases = append(phases, phase{head: writeHead(t, journal), tree: tree(t, m.dir)})
	}
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, from := range []struct {
		hints *Hints
		phase int
	}{{nil, 0}, {hints, 1}} {
		var dir = t.TempDir()
		var p = NewPlayer(stack.Journals(), journal, dir, 0xB4)
		for i := from.phase; i < len(phases); i++ {
			var err error
			if i == from.phase {
				err = p.PlayTo(ctx, from.hints, phases[i].head)
			} else {
				err = p.PlayOn(ctx, phases[i].head)
			}
			if err != nil {
				t.Fatalf("playing through phase %d: %v", i, err)
			}
			var got = tree(t, dir)
			if len(got) != len(phases[i].tree) {
				t.Errorf("through phase %d (from %d): %d files, want %d", i, from.phase, len(got), len(phases[i].tree))
			}
			for name, b := range phases[i].tree {
				if !bytes.Equal(got[name], b) {
					t.Errorf("through phase %d (from %d): %s differs", i, from.phase, name)
				}
			}
		}
		if err := p.PlayOn(ctx, phases[0].head); err == nil {
			t.Error("played on back to an earlier offset")
		}
	}
	if err := NewPlayer(stack.Journals(), journal, t.TempDir(), 0xB5).PlayOn(ctx, phases[0].head); err == nil {
		t.Error("played on without a PlayTo")
	}
}

// Sync hands the ops recorded so far to the journal client, in order, and
// returns without waiting for them to commit: with an append held back (by
// a Barrier waiting on an operation not yet done), Sync returns and
// SyncAll waits; once the operation is done, the log holds every op, the
// file's writes before what was recorded after the Sync.
func TestSyncOrdersWithoutWaiting(t *testing.T) {
	var journal = newLog(t)
	var a = newMirror(t, journal, nil, 0xA1)
	a.create("one")
	a.write("one", []byte("before"), -1)
	var held = client.NewAsyncOperation()
	var barrier = a.rec.Barrier(client.OpFutures{held: {}})

	a.write("one", []byte(" synced"), -1)
	var synced = make(chan error, 1)
	go func() { synced <- a.rec.Sync(a.fns["one"]) }()
	select {
	case err := <-synced:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Sync waited for an append held back")
	}
	a.property("CURRENT", []byte("after"))
	var ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := a.rec.SyncAll(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SyncAll with an append held back: %v; want the context's deadline", err)
	}

	held.Resolve(nil)
	<-barrier.Done()
	if err := barrier.Err(); err != nil {
		t.Fatal(err)
	} else if err = a.rec.SyncAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	var _, dir, _ = play(t, journal, nil, 0xA2)
	sameTree(t, a.dir, dir)
}

// The ops of one call that records several, each a step which leaves the
// directory as no file system would (a Rename's removal of the file it
// replaces, and its links), go to the journal client in one append: the log
// holds all of them or none, however near a batch is to FlushBytes. Only a
// write's ops may be split, between them: a log ending within a write holds
// a prefix of it, as a file system failing within one may.
func TestCallsRecordTheirOpsInOneAppend(t *testing.T) {
	var journal = newLog(t)
	var a = newMirror(t, journal, nil, 0xA1)
	var calls = []struct {
		name string
		call func()
	}{
		{"a rename over a file", func() { a.create("tmp"); a.rename("tmp", "target") }},
		{"a property over a file", func() { a.property("target", []byte("property")) }},
		{"a file over a property", func() { a.create("target") }},
		{"a file over a file", func() { a.create("target") }},
		{"a rename of a property over a file", func() { a.property("tmp", []byte("p")); a.create("target"); a.rename("tmp", "target") }},
	}
	a.create("target")
	a.create("filler")
	for _, c := range calls {
		for gap := 1; gap < 400; gap += 37 {
			// Gather ops just short of FlushBytes, then make the call.
			a.check(a.rec.SyncAll(context.Background()))
			a.write("filler", make([]byte, FlushBytes-100-gap), -1)
			a.rec.mu.Lock()
			var last, gathered = a.rec.last, len(a.rec.buf)
			a.rec.mu.Unlock()
			if gathered >= FlushBytes {
				t.Fatalf("gathered %d bytes, FlushBytes or more, without an append", gathered)
			}
			c.call()
			a.rec.mu.Lock()
			var split = a.rec.last != last || len(a.rec.buf) <= gathered
			a.rec.mu.Unlock()
			if split {
				t.Fatalf("%s, %d bytes short of FlushBytes: its ops went to the journal client apart from the ops gathered before it", c.name, FlushBytes-gathered)
			}
		}
	}
	a.check(a.rec.SyncAll(context.Background()))
	var _, dir, _ = play(t, journal, nil, 0xA2)
	sameTree(t, a.dir, dir)
}
