package recoverylog

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
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
	var started = map[string]int{} // Of the writer's goroutine, read once Play stopped it.
	p.behind.start = func(f *os.File) error {
		started[filepath.Base(f.Name())]++
		return startWriteback(f)
	}
	p.FinishAtWriteHead()
	if _, err := p.Play(ctx, nil); err != nil {
		t.Fatal(err)
	}
	// Those Play's end left to begin are skipped.
	if started["large"] == 0 || started["large"]+int(p.behind.skipped.Load()) != 5 || started["small"] != 0 || p.behind.failed.Load() {
		t.Fatalf("writebacks begun %v, skipped %d (failed %v), want 5 of large and none of small",
			started, p.behind.skipped.Load(), p.behind.failed.Load())
	}
	sameTree(t, m.dir, dir)
}

// A file system which declines a writeback, or fails it, isn't asked again.
func TestWriteBehindStopsAtAFailure(t *testing.T) {
	var f, err = os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, fail := range []error{errors.ErrUnsupported, errors.New("EIO")} {
		var calls int
		var w = newWriteBehind(func(*os.File) error {
			calls++
			return fail
		})
		w.wrote(1, f, writeBehindBytes)
		for deadline := time.Now().Add(10 * time.Second); !w.failed.Load(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%v: the writer never failed", fail)
			}
		}
		for range 8 {
			w.wrote(1, f, writeBehindBytes)
		}
		w.stop()
		if calls != 1 || !w.failed.Load() || w.skipped.Load() != 0 {
			t.Fatalf("%v: %d calls, failed %v, %d skipped; want 1, true and none", fail, calls, w.failed.Load(), w.skipped.Load())
		}
	}
}

// A forgotten node's bytes don't count toward a later file of the node.
func TestWriteBehindForgets(t *testing.T) {
	var calls atomic.Int64
	var w = newWriteBehind(func(*os.File) error { calls.Add(1); return nil })
	w.wrote(7, nil, writeBehindBytes-1)
	w.forget(7)
	w.wrote(7, nil, writeBehindBytes-1)
	if w.files != nil {
		t.Fatal("a writeback was asked")
	}
	w.wrote(7, nil, 1)
	w.stop()
	if calls.Load()+w.skipped.Load() != 1 {
		t.Fatalf("%d writebacks begun and %d skipped, want 1", calls.Load(), w.skipped.Load())
	}
	// A stop forgets what each file had written, as the player closed them.
	w.wrote(7, nil, writeBehindBytes-1)
	w.stop()
	w.wrote(7, nil, 1)
	w.stop()
	if calls.Load()+w.skipped.Load() != 1 {
		t.Fatalf("%d writebacks begun and %d skipped, want 1", calls.Load(), w.skipped.Load())
	}
}

// A writer that falls behind the player neither blocks it nor queues
// without bound: the player skips what the writer can't take, which the
// file's next writeback covers. A closed file is no failure.
func TestWriteBehindNeverBlocksThePlayer(t *testing.T) {
	var f, err = os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	var release = make(chan struct{})
	var calls atomic.Int64
	var w = newWriteBehind(func(f *os.File) error {
		if calls.Add(1) == 1 {
			<-release // The disk's queue is full.
		}
		return startWriteback(f)
	})
	for range 10 * writeBehindQueue {
		w.wrote(1, f, writeBehindBytes) // Returns though the writer is blocked.
	}
	f.Close()
	close(release)
	w.stop()
	if w.failed.Load() {
		t.Fatal("a closed file failed the writer")
	}
	if n := calls.Load() + w.skipped.Load(); n < 1 || n > writeBehindQueue+1 {
		t.Fatalf("%d writebacks begun or skipped, want 1 to %d", n, writeBehindQueue+1)
	}
}
