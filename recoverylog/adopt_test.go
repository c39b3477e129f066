package recoverylog

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/protobuf/proto"
)

// A store forked from another's files adopts them: its log records none of
// their bytes, and players read them from the other's log, through
// generations of forks, after the other removed them, until the adopter
// re-records them. Pruning the other's log keeps what adopters need.
func TestAdoptedFiles(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var parentLog, childLog, grandLog = newLog(t), newLog(t), newLog(t)
	var chunk = func(i int) []byte { return bytes.Repeat([]byte{byte(i), 0xAD, byte(i >> 8)}, 20<<10) } // 60 KiB.

	var parent = newMirror(t, parentLog, nil, 0xA1)
	parent.create("noise.log")
	for i, name := range []string{"000007.sst", "000008.sst"} {
		parent.create(name)
		for j := range 3 {
			parent.write(name, chunk(10*i+j), -1)
			parent.write("noise.log", chunk(99), -1) // Other ops amid a node's.
		}
	}
	parent.link("000008.sst", "backup/000008.sst")
	srcs, err := parent.rec.Sources(ctx, "000007.sst", "000008.sst")
	if err != nil {
		t.Fatal(err)
	}

	// The child links the parent's files under names of its own, and
	// adopts them; it writes a file of its own too.
	var child = newMirror(t, childLog, nil, 0xB1)
	var adopted = []string{"000010.sst", "sub/000011.sst"}
	for i, name := range adopted {
		child.check(os.MkdirAll(filepath.Dir(child.path(name)), 0o755))
		child.check(os.Link(parent.path([]string{"000007.sst", "000008.sst"}[i]), child.path(name)))
		child.check(child.rec.Adopt(child.path(name), srcs[i]))
	}
	child.create("MANIFEST-000012")
	child.write("MANIFEST-000012", []byte("the child's own"), -1)

	// The parent goes on: it removes the files the child adopted.
	parent.remove("000007.sst")
	parent.remove("000008.sst")
	parent.remove("backup/000008.sst")
	parent.remove("noise.log")
	parent.create("000009.sst")
	parent.write("000009.sst", chunk(7), -1)
	var parentHints = parent.hints()

	var childHints = child.hints()
	var st = StatsOf(childHints)
	if st.AdoptedFiles != 2 || st.AdoptedBytes < 2*3*int64(len(chunk(0))) || st.HintedBytes > 4096 {
		t.Fatalf("stats of the child's hints: %+v", st)
	}
	for _, h := range []*Hints{childHints, nil} {
		var dir, p = playCopy(t, childLog, h)
		sameTree(t, child.dir, dir)
		if p.BytesRead() < st.AdoptedBytes {
			t.Fatalf("playback read %d bytes, fewer than the %d adopted", p.BytesRead(), st.AdoptedBytes)
		}
	}

	// The grandchild adopts a file the child adopted.
	gsrc, err := child.rec.Sources(ctx, "sub/000011.sst")
	if err != nil {
		t.Fatal(err)
	} else if !proto.Equal(gsrc[0].Node.Source, srcs[1]) {
		t.Fatalf("source of an adopted node: %v; want it to adopt %v", gsrc[0].Node.Source, srcs[1])
	}
	var grand = newMirror(t, grandLog, nil, 0xC1)
	grand.check(os.Link(child.path("sub/000011.sst"), grand.path("000020.sst")))
	grand.check(grand.rec.Adopt(grand.path("000020.sst"), gsrc[0]))
	var grandHints = grand.hints()
	var dir, _ = playCopy(t, grandLog, grandHints)
	sameTree(t, grand.dir, dir)

	// A player ended amid an adoption leaves the directory it adopted in,
	// beside its own: the next player of its directory removes it (and not
	// another's), and leaves none of its own.
	var base = t.TempDir()
	var into, stale, others = filepath.Join(base, "shard"), filepath.Join(base, ".shard.adopt-123"), filepath.Join(base, ".shard2.adopt-1")
	for _, d := range []string{into, filepath.Join(stale, "sub"), others} {
		grand.check(os.MkdirAll(d, 0o755))
	}
	if err = NewPlayer(stack.Journals(), grandLog, into, 0xF2).PlayToWriteHead(ctx, grandHints); err != nil {
		t.Fatal(err)
	}
	sameTree(t, grand.dir, into)
	if entries, err := os.ReadDir(base); err != nil {
		t.Fatal(err)
	} else if len(entries) != 2 || entries[0].Name() != ".shard2.adopt-1" || entries[1].Name() != "shard" {
		t.Fatalf("beside the player's directory after its play: %v; want only the other's scratch and its own", entries)
	}

	// The parent's own hints no longer need what it removed; the child's
	// and the grandchild's do.
	var first = func(src *Source) int64 { return src.Node.Segments[0].FirstOffset }
	if own := NeededFrom(parentLog, parentHints); own <= first(srcs[1]) {
		t.Fatalf("the parent's hints need its log from %d; want past its removed files (from %d)", own, first(srcs[1]))
	} else if got := NeededFrom(parentLog, parentHints, childHints); got != min(first(srcs[0]), first(srcs[1])) {
		t.Fatalf("with the child's hints, the parent's log is needed from %d; want %d", got, min(first(srcs[0]), first(srcs[1])))
	} else if got = NeededFrom(parentLog, parentHints, grandHints); got != first(srcs[1]) {
		t.Fatalf("with the grandchild's hints, the parent's log is needed from %d; want %d", got, first(srcs[1]))
	}

	// Once the child re-records an adopted file, its hints no longer adopt it.
	fn, _ := child.rec.fsm.Lookup("000010.sst")
	if _, err = child.rec.Rebase(fn); err != nil {
		t.Fatal(err)
	}
	var rebased = child.hints()
	if st = StatsOf(rebased); st.AdoptedFiles != 1 {
		t.Fatalf("after a rebase, %d files adopted; want 1", st.AdoptedFiles)
	} else if got := NeededFrom(parentLog, parentHints, rebased); got != first(srcs[1]) {
		t.Fatalf("after the rebase, the parent's log is needed from %d; want %d", got, first(srcs[1]))
	}
	dir, _ = playCopy(t, childLog, rebased)
	sameTree(t, child.dir, dir)
}

// playCopy plays journal from hints into a new directory through its write
// head, without fencing it: its recorder goes on.
func playCopy(t *testing.T, journal pb.Journal, hints *Hints) (string, *Player) {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var p = NewPlayer(stack.Journals(), journal, t.TempDir(), 0xF1)
	if err := p.PlayToWriteHead(ctx, hints); err != nil {
		t.Fatalf("playing %s: %v", journal, err)
	}
	return p.dir, p
}

// Adoptions a recorder can't vouch for are refused, and a source whose
// segments don't hold its node fails playback, naming the log and offset.
func TestBadAdoptions(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var parentLog, childLog = newLog(t), newLog(t)
	var parent = newMirror(t, parentLog, nil, 0xA1)
	parent.create("a.sst")
	parent.write("a.sst", bytes.Repeat([]byte("a"), 5000), -1)
	parent.create("b.sst")
	parent.write("b.sst", []byte("short"), -1)
	srcs, err := parent.rec.Sources(ctx, "a.sst", "b.sst")
	if err != nil {
		t.Fatal(err)
	} else if _, err = parent.rec.Sources(ctx, "none.sst"); err == nil {
		t.Fatal("the source of a file not recorded was given")
	}

	var child = newMirror(t, childLog, nil, 0xB1)
	child.check(os.Link(parent.path("a.sst"), child.path("a.sst")))
	for _, tc := range []struct {
		name string
		src  *Source
		want string
	}{
		{"a.sst", srcs[1], "of 5000 bytes, as node"},
		{"missing.sst", srcs[0], "no such file"},
		{"a.sst", &Source{Log: string(parentLog)}, "without a log"},
		{"../a.sst", srcs[0], "not within"},
	} {
		if err := child.rec.Adopt(child.path(tc.name), tc.src); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("adopt of %s from %v: %v; want an error containing %q", tc.name, tc.src, err, tc.want)
		}
	}
	child.create("own.sst")
	child.write("own.sst", []byte("own"), -1)
	own, err := child.rec.Sources(ctx, "own.sst")
	if err != nil {
		t.Fatal(err)
	}
	child.check(os.Link(child.path("own.sst"), child.path("again.sst")))
	if err = child.rec.Adopt(child.path("again.sst"), own[0]); err == nil || !strings.Contains(err.Error(), "of this log") {
		t.Errorf("adopt of the log's own node: %v", err)
	}
	child.check(os.Remove(child.path("again.sst")))

	// A source whose segment begins amid another op.
	var bad = proto.CloneOf(srcs[0])
	bad.Node.Segments[0].FirstOffset++
	child.check(child.rec.Adopt(child.path("a.sst"), bad))
	var p = NewPlayer(stack.Journals(), childLog, t.TempDir(), 0xB2)
	p.FinishAtWriteHead()
	if _, err = p.Play(ctx, child.hints()); err == nil || !strings.Contains(err.Error(), string(parentLog)) ||
		!strings.Contains(err.Error(), "adopts node") {
		t.Fatalf("playback of a bad source: %v", err)
	}
}
