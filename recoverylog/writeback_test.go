package recoverylog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A player begins the writeback of a file it plays each time a MiB more of
// it is written, and of a file of less not at all; the kernel takes it.
func TestPlayerBeginsWritebackAsItWrites(t *testing.T) {
	var journal = newLog(t)
	var m = newMirror(t, journal, nil, 0xA1)
	m.create("large")
	m.create("small")
	var chunk = make([]byte, 256<<10)
	for i := range 22 { // 5.5 MiB.
		chunk[0] = byte(i)
		m.write("large", chunk, -1)
	}
	m.write("small", chunk, -1)
	m.property("CURRENT", []byte("v1"))
	var barrier = m.rec.Barrier(nil)
	if <-barrier.Done(); barrier.Err() != nil {
		t.Fatal(barrier.Err())
	}

	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var dir = t.TempDir()
	var p = NewPlayer(stack.Journals(), journal, dir, 0xB2)
	var started = map[string]int{}
	p.behind.start = func(f *os.File) error {
		started[filepath.Base(f.Name())]++
		return startWriteback(f)
	}
	p.FinishAtWriteHead()
	if _, err := p.Play(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if started["large"] != 5 || started["small"] != 0 || p.behind.failed {
		t.Fatalf("writebacks begun %v (failed %v), want 5 of large and none of small", started, p.behind.failed)
	}
	sameTree(t, m.dir, dir)
}

// A file system which declines a writeback isn't asked again.
func TestWriteBehindStopsAtAFailure(t *testing.T) {
	var calls int
	var w = writeBehind{unsynced: map[Fnode]int64{}, start: func(*os.File) error {
		calls++
		return errors.ErrUnsupported
	}}
	var f, err = os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for range 8 {
		w.wrote(1, f, writeBehindBytes)
	}
	if calls != 1 || !w.failed {
		t.Fatalf("%d calls, failed %v; want 1 and true", calls, w.failed)
	}
}

// A forgotten node's bytes don't count toward a later file of the node.
func TestWriteBehindForgets(t *testing.T) {
	var calls int
	var w = writeBehind{unsynced: map[Fnode]int64{}, start: func(*os.File) error { calls++; return nil }}
	w.wrote(7, nil, writeBehindBytes-1)
	w.forget(7)
	w.wrote(7, nil, writeBehindBytes-1)
	if calls != 0 {
		t.Fatalf("%d writebacks begun, want none", calls)
	}
	w.wrote(7, nil, 1)
	if calls != 1 {
		t.Fatalf("%d writebacks begun, want 1", calls)
	}
}
