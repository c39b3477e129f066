package txnkv_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

// An overlay returns the last write of each key, and ascends them in key
// order, rewritten keys included, however the writes interleave with reads.
func TestOverlay(t *testing.T) {
	// Scans as it's written index the overlay in a B-tree; a frozen one
	// never scanned before sorts its entries at its first scan, which
	// several goroutines may make at once.
	for _, mode := range []string{"scanned while written", "frozen unscanned", "frozen after a scan", "colliding"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "colliding" {
				defer txnkv.CollideKeys(3)()
			}
			var o = txnkv.NewOverlay()
			defer o.Release()
			var model = map[string]string{} // Deleted keys map to "<deleted>".
			for i := range 600 {
				var k = fmt.Sprintf("k%03d", i*7%301)
				if i%5 == 4 {
					o.Delete([]byte(k))
					model[k] = "<deleted>"
				} else {
					var v = strings.Repeat("v", i%9)
					o.Put([]byte(k), []byte(v))
					model[k] = v
				}
				if mode == "scanned while written" && i%97 == 0 || mode == "frozen after a scan" && i == 300 {
					o.Ascend([]byte("k1"), []byte("k2"), func(txnkv.Entry) bool { return true })
				}
			}
			if mode != "scanned while written" {
				o.Freeze()
			}
			var keys []string
			for k, v := range model {
				keys = append(keys, k)
				var e, ok = o.Get([]byte(k))
				if got := string(e.Value); !ok || (e.Deleted && v != "<deleted>") || (!e.Deleted && got != v) {
					t.Fatalf("Get(%s) = %+v %v, want %s", k, e, ok, v)
				}
			}
			slices.Sort(keys)
			// Ranges from the first key, between keys, on keys, past the
			// last; scans which stop early.
			var bounds = []string{"", "a", "k000", "k0005", "k150", "k1505", "k300", "k301", "z"}
			var wg sync.WaitGroup
			for _, start := range bounds {
				for _, end := range append(bounds, "<nil>") {
					var scan = func() {
						var endKey []byte
						if end != "<nil>" {
							endKey = []byte(end)
						}
						var want, got []string
						for _, k := range keys {
							if k >= start && (endKey == nil || k < end) {
								want = append(want, k+"="+model[k])
							}
						}
						o.Ascend([]byte(start), endKey, func(e txnkv.Entry) bool {
							var v = string(e.Value)
							if e.Deleted {
								v = "<deleted>"
							}
							got = append(got, string(e.Key)+"="+v)
							return len(got) < 50
						})
						want = want[:min(len(want), 50)]
						if !slices.Equal(got, want) {
							t.Errorf("Ascend(%q, %q) = %q, want %q", start, end, got, want)
						}
					}
					if mode == "scanned while written" {
						scan() // An unfrozen overlay is read by one goroutine.
					} else {
						wg.Go(scan)
					}
				}
			}
			wg.Wait()
			if o.Len() != len(model) {
				t.Fatalf("Len = %d, want %d", o.Len(), len(model))
			}
			var each int
			o.Each(func(*txnkv.Entry) { each++ })
			if each != len(model) {
				t.Fatalf("Each visited %d entries, want %d", each, len(model))
			}
		})
	}
}

// base is a Base of a map, whose Write fails with writeErr, or returns
// durable as its future.
type base struct {
	mu       sync.Mutex // Gets and Scans may run as Write does.
	rows     map[string]string
	writeErr error
	durable  *client.AsyncOperation
	settled  int
}

func (b *base) Get(key []byte) ([]byte, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var v, ok = b.rows[string(key)]
	return []byte(v), ok, nil
}

func (b *base) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	// As of one moment, as a database's iterator: a Write may follow it.
	b.mu.Lock()
	var rows = make(map[string]string)
	for k, v := range b.rows {
		if k >= string(start) && (end == nil || k < string(end)) {
			rows[k] = v
		}
	}
	b.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(rows)) {
		if !fn([]byte(k), []byte(rows[k])) {
			break
		}
	}
	return nil
}

func (b *base) Checkpoint() ([]byte, error) {
	if v, ok := b.rows[txnkv.CheckpointKey]; ok {
		return []byte(v), nil
	}
	return nil, nil
}

func (b *base) Write(w *txnkv.Overlay, checkpoint []byte) (client.OpFuture, error) {
	if b.writeErr != nil {
		return nil, b.writeErr
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	w.Ascend(nil, nil, func(e txnkv.Entry) bool {
		if e.Deleted {
			delete(b.rows, string(e.Key))
		} else {
			b.rows[string(e.Key)] = string(e.Value)
		}
		return true
	})
	b.rows[txnkv.CheckpointKey] = string(checkpoint)
	return b.durable, nil
}

func (b *base) Settled(*txnkv.Overlay) { b.settled++ }

func (b *base) Shared() runtime.Reader { return b }

func checkpointAt(n int64) pc.Checkpoint {
	return pc.Checkpoint{Sources: map[pb.Journal]pc.Checkpoint_Source{"source/a": {ReadThrough: n}}}
}

// A commit resolves once its Base holds it durably; reads shadow the Base
// with its writes until the Store settles it; a Base's failure to write or
// to make durable fails the commit, named by the store and wrapped.
func TestCommit(t *testing.T) {
	var b = &base{rows: map[string]string{"a": "base"}, durable: client.NewAsyncOperation()}
	var s = txnkv.New("test", b)
	defer s.Destroy()
	if err := s.Put([]byte("a"), []byte("txn")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put([]byte(txnkv.CheckpointKey), nil); err == nil {
		t.Fatal("Put of a reserved key succeeded")
	}
	var op = s.StartCommit(nil, checkpointAt(1), nil)
	var v, _, _ = s.Get([]byte("a"))
	if string(v) != "txn" {
		t.Fatalf("Get(a) while committing = %q", v)
	}
	select {
	case <-op.Done():
		t.Fatal("the commit resolved before it was durable")
	default:
	}
	var lost = errors.New("lost")
	b.durable.Resolve(lost)
	<-op.Done()
	if err := op.Err(); !errors.Is(err, lost) || !strings.HasPrefix(err.Error(), "store test: commit: ") {
		t.Fatalf("commit: %v", err)
	}
	// The write was applied: reads settle it and go to the Base.
	if v, _, err := s.Get([]byte("a")); string(v) != "txn" || err != nil || b.settled != 1 {
		t.Fatalf("Get(a) after the commit = %q, %v; settled %d times", v, err, b.settled)
	}

	var failing = &base{rows: map[string]string{}, writeErr: errors.New("disk full")}
	var f = txnkv.New("failing", failing)
	defer f.Destroy()
	_ = f.Put([]byte("a"), []byte("1"))
	op = f.StartCommit(nil, checkpointAt(1), nil)
	<-op.Done()
	if err := op.Err(); !errors.Is(err, failing.writeErr) {
		t.Fatalf("commit: %v", err)
	}
	if _, _, err := f.Get([]byte("a")); err == nil || !strings.Contains(err.Error(), "a commit failed") {
		t.Fatalf("Get after a failed commit: %v", err)
	}
	if cp, err := f.RestoreCheckpoint(nil); err != nil || len(cp.Sources) != 0 {
		t.Fatalf("checkpoint after a failed first commit: %v %v", cp, err)
	}
}

// Destroy abandons a commit waiting for its appends: it is never written.
func TestCloseAbandonsWaitingCommit(t *testing.T) {
	var b = &base{rows: map[string]string{}, durable: client.NewAsyncOperation()}
	var s = txnkv.New("test", b)
	_ = s.Put([]byte("a"), []byte("1"))
	var never = client.NewAsyncOperation()
	var op = s.StartCommit(nil, checkpointAt(1), client.OpFutures{never: {}})
	s.Destroy()
	<-op.Done()
	if err := op.Err(); err == nil || !strings.Contains(err.Error(), "destroyed") {
		t.Fatalf("abandoned commit: %v", err)
	}
	if len(b.rows) != 0 {
		t.Fatalf("an abandoned commit wrote %v", b.rows)
	}
}

// FuzzOverlayOrder checks that a frozen overlay, sorted at its first scan,
// one indexed as it's written, and one scanned over ranges as it's
// written (by passes over its entries, then by its index once the passes
// have cost enough) ascend in the order of bytes.Compare, whatever the
// keys: empty, prefixes of each other, sharing long prefixes, holding zero
// bytes (which sorting by eight-byte words pads keys with).
func FuzzOverlayOrder(f *testing.F) {
	f.Add([]byte("\x00\x00\x01\x00\x02\x01\x00\xff\x00\x03ab\x02a\x00\x01a"))
	f.Add([]byte("\x09tableNNNN\x0atableNNNNx\x0btableNNNNx\x00\x00tableNNN"))
	f.Fuzz(func(t *testing.T, program []byte) {
		// The program is a sequence of keys, each a length byte then
		// that many bytes.
		var keys [][]byte
		for len(program) != 0 {
			var n = min(int(program[0]), len(program)-1)
			keys, program = append(keys, program[1:1+n]), program[1+n:]
		}
		if len(program)%2 == 1 {
			defer txnkv.CollideKeys(4)() // Keys' hashes collide.
		}
		var frozen, indexed, ranged = txnkv.NewOverlay(), txnkv.NewOverlay(), txnkv.NewOverlay()
		defer frozen.Release()
		defer indexed.Release()
		defer ranged.Release()
		var want []string
		var model = map[string]string{}
		// checkRange checks an ascent of o over [start, end) (end nil: no
		// bound), stopped after stop entries if stop isn't 0.
		var checkRange = func(o *txnkv.Overlay, start, end []byte, stop int) {
			t.Helper()
			var inRange []string
			for k := range model {
				if k >= string(start) && (end == nil || k < string(end)) {
					inRange = append(inRange, k)
				}
			}
			slices.Sort(inRange)
			if stop != 0 && len(inRange) > stop {
				inRange = inRange[:stop]
			}
			var got []string
			o.Ascend(start, end, func(e txnkv.Entry) bool {
				got = append(got, string(e.Key))
				if string(e.Value) != model[string(e.Key)] {
					t.Fatalf("Ascend(%q, %q): %q = %q, want %q", start, end, e.Key, e.Value, model[string(e.Key)])
				}
				return stop == 0 || len(got) < stop
			})
			if !slices.Equal(got, inRange) {
				t.Fatalf("Ascend(%q, %q) = %q, want %q", start, end, got, inRange)
			}
		}
		for i, k := range keys {
			var v = fmt.Sprint(i)
			frozen.Put(k, []byte(v))
			indexed.Put(k, []byte(v))
			ranged.Put(k, []byte(v))
			model[string(k)] = v
			if i%3 == 0 {
				indexed.Ascend(nil, nil, func(txnkv.Entry) bool { return true })
			}
			// A range between two keys of the program, either way round
			// (an empty range if the first is the greater), or unbounded.
			var start, end = k, keys[(i*7+1)%len(keys)]
			if i%5 == 4 {
				end = nil
			}
			checkRange(ranged, start, end, i%4)
			if !slices.Contains(want, string(k)) {
				want = append(want, string(k))
			}
		}
		slices.Sort(want)
		frozen.Freeze()
		ranged.Freeze()
		for k, v := range model {
			for _, o := range []*txnkv.Overlay{frozen, indexed, ranged} {
				if e, ok := o.Get([]byte(k)); !ok || string(e.Value) != v {
					t.Fatalf("Get(%q) = %q %v, want %q", k, e.Value, ok, v)
				}
			}
		}
		if _, ok := frozen.Get([]byte("\xffabsent")); ok && model["\xffabsent"] == "" {
			t.Fatal("Get of an absent key found it")
		}
		// Frozen, each is scanned over ranges (by passes, then sorted,
		// for one neither indexed nor sorted yet), and whole.
		for i, k := range keys {
			for _, o := range []*txnkv.Overlay{frozen, indexed, ranged} {
				checkRange(o, k, keys[(i*3+2)%len(keys)], 0)
			}
		}
		for _, o := range []*txnkv.Overlay{frozen, indexed, ranged} {
			var got []string
			o.Ascend(nil, nil, func(e txnkv.Entry) bool { got = append(got, string(e.Key)); return true })
			if !slices.Equal(got, want) {
				t.Fatalf("Ascend = %q, want %q", got, want)
			}
		}
	})
}

// An overlay of many entries answers lookups through a filter of their
// hashes first, which it keeps as it's written: it finds every key it has,
// by Get and GetHashed, and none it hasn't, with keys' hashes colliding or
// not, as it grows (its filter made, then made again larger), once frozen,
// and after a rollback to a savepoint drops entries below the filter's
// making and more are written.
func TestOverlayFilter(t *testing.T) {
	for _, colliding := range []bool{false, true} {
		t.Run(fmt.Sprintf("colliding=%v", colliding), func(t *testing.T) {
			if colliding {
				defer txnkv.CollideKeys(97)()
			}
			var o = txnkv.NewOverlay()
			defer o.Release()
			var model = map[string]string{}
			var check = func(when string) {
				t.Helper()
				for i := range 10000 {
					var key = fmt.Appendf(nil, "key-%d", i)
					var e, ok = o.Get(key)
					var e2, ok2 = o.GetHashed(key, txnkv.HashKey(key))
					var want, has = model[string(key)]
					if ok != has || ok2 != has {
						t.Fatalf("%s: Get(%s): found %v (hashed: %v), want %v", when, key, ok, ok2, has)
					} else if ok && (string(e.Value) != want || string(e2.Value) != want) {
						t.Fatalf("%s: Get(%s) = %q (hashed: %q), want %q", when, key, e.Value, e2.Value, want)
					}
				}
			}
			var put = func(i int, v string) {
				var key = fmt.Sprintf("key-%d", i)
				o.Put([]byte(key), []byte(v))
				model[key] = v
			}
			put(0, "first")
			o.Savepoint()
			var saved = maps.Clone(model)
			for i := range 5000 {
				put(i*2, fmt.Sprint(i))
				if i == 500 || i == 1100 || i == 2100 {
					check(fmt.Sprintf("%d entries", len(model)))
				}
			}
			check("written")
			o.RollbackToSavepoint()
			model = saved
			check("rolled back")
			for i := range 700 {
				put(i*3, fmt.Sprint(-i))
			}
			check("written after the rollback")
			o.ReleaseSavepoint()
			o.Freeze()
			check("frozen")
		})
	}
}

// A commit may start before the previous one is applied: reads of the
// store see both at once; the Base applies them in order, the second only
// after the first, which it fails with if the first fails; a third waits
// for the first to be applied.
func TestCommitStartedBeforeThePreviousIsApplied(t *testing.T) {
	for _, fail := range []bool{false, true} {
		var b = &base{rows: map[string]string{"a": "0", "b": "0"}, durable: client.NewAsyncOperation()}
		b.durable.Resolve(nil)
		var s = txnkv.New("test", b)
		var firstAppends, secondAppends = client.NewAsyncOperation(), client.NewAsyncOperation()
		_ = s.Put([]byte("a"), []byte("1"))
		var first = s.StartCommit(nil, checkpointAt(1), client.OpFutures{firstAppends: {}})
		_ = s.Put([]byte("b"), []byte("2"))
		var second = s.StartCommit(nil, checkpointAt(2), client.OpFutures{secondAppends: {}})
		_ = s.Put([]byte("c"), []byte("3"))

		var got []string
		if err := s.Scan(nil, nil, func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true }); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, ",") != "a=1,b=2,c=3" {
			t.Fatalf("fail=%v: read %v with two commits in flight", fail, got)
		}
		if v, _, _ := s.Get([]byte("a")); string(v) != "1" {
			t.Fatalf("fail=%v: a=%s with two commits in flight, want the first's 1", fail, v)
		}

		// The second's appends resolve first: the Base still waits for the first.
		secondAppends.Resolve(nil)
		time.Sleep(20 * time.Millisecond)
		b.mu.Lock()
		var a, bv = b.rows["a"], b.rows["b"]
		b.mu.Unlock()
		if a != "0" || bv != "0" {
			t.Fatalf("fail=%v: the Base holds a=%s b=%s before the first commit's appends", fail, a, bv)
		}
		var third = make(chan client.OpFuture, 1)
		go func() { third <- s.StartCommit(nil, checkpointAt(3), nil) }()
		select {
		case <-third:
			t.Fatalf("fail=%v: a third commit started with two in flight, the first not applied", fail)
		case <-time.After(20 * time.Millisecond):
		}
		if fail {
			firstAppends.Resolve(errors.New("append failed"))
		} else {
			firstAppends.Resolve(nil)
		}
		var op = <-third
		for i, c := range []client.OpFuture{first, second, op} {
			var err = c.Err()
			switch {
			case !fail && err != nil:
				t.Fatalf("commit %d: %v", i+1, err)
			case fail && (err == nil || !strings.Contains(err.Error(), "append failed")):
				t.Fatalf("commit %d after the first's appends failed: %v", i+1, err)
			}
		}
		if !fail {
			b.mu.Lock()
			var want = map[string]string{"a": "1", "b": "2", "c": "3"}
			for k, v := range want {
				if b.rows[k] != v {
					t.Errorf("the Base holds %s=%s, want %s", k, b.rows[k], v)
				}
			}
			b.mu.Unlock()
		}
		s.Destroy()
	}
}

// A scan of a narrow range of an overlay passes over its entries rather
// than index them (as Fire's read of what fell due does at a transaction's
// end), until the passes have cost about as much as the index, or a scan
// is of many of its entries: then the overlay is indexed, and its scans
// ascend the index.
func TestOverlayScanPasses(t *testing.T) {
	var o = txnkv.NewOverlay()
	defer o.Release()
	for i := range 10000 {
		o.Put(fmt.Appendf(nil, "row-%05d", i), []byte("v"))
	}
	var scan = func(start, end string) (n int) {
		o.Ascend([]byte(start), []byte(end), func(txnkv.Entry) bool { n++; return true })
		return n
	}
	for i := range 15 {
		if n := scan("row-00100", "row-00110"); n != 10 {
			t.Fatalf("scan %d: %d entries, want 10", i, n)
		} else if txnkv.Indexed(o) {
			t.Fatalf("indexed after %d narrow scans of 10 of 10000 entries", i+1)
		}
	}
	for i := 0; !txnkv.Indexed(o); i++ {
		if i == 2 {
			t.Fatal("not indexed after scans of every entry")
		} else if n := scan("row", "rox"); n != 10000 {
			t.Fatalf("a scan of all: %d entries, want 10000", n)
		}
	}
	o.Put([]byte("row-00105x"), []byte("v"))
	if n := scan("row-00100", "row-00110"); n != 11 {
		t.Fatalf("indexed, a scan: %d entries, want 11", n)
	}
}

// A scan of a range whose keys begin with a byte that few of the overlay's
// keys begin with (the index of what falls due, beside a transaction's rows
// of tables) compares only the keys of those: its passes cost so little
// that a transaction may scan it many times, as it writes, without the
// overlay being indexed.
func TestOverlayScansOfAnotherFirstByteStayPasses(t *testing.T) {
	var o = txnkv.NewOverlay()
	defer o.Release()
	for i := range 10000 {
		o.Put(fmt.Appendf(nil, "row-%05d", i), []byte("v"))
	}
	for i := range 100 {
		o.Put(fmt.Appendf(nil, "\x01due/%05d", i), nil)
	}
	for i := range 100 {
		var n int
		o.Ascend([]byte("\x01due/00010"), []byte("\x01due/00020"), func(e txnkv.Entry) bool { n++; return true })
		if n != 10 {
			t.Fatalf("scan %d: %d entries, want 10", i, n)
		} else if txnkv.Indexed(o) {
			t.Fatalf("indexed after %d scans of a range of another first byte than most keys'", i+1)
		}
		o.Put(fmt.Appendf(nil, "\x01due/%05d", 100+i), nil) // It writes what falls due later as it goes.
		o.Put(fmt.Appendf(nil, "row-x%05d", i), []byte("v"))
	}
	// Empty keys, and ranges of the first byte 0, are passed over too.
	o.Put(nil, []byte("empty"))
	var keys []string
	o.Ascend(nil, []byte("\x01due/00001"), func(e txnkv.Entry) bool { keys = append(keys, string(e.Key)); return true })
	if want := []string{"", "\x01due/00000"}; !slices.Equal(keys, want) {
		t.Fatalf("a scan from the empty key: %q, want %q", keys, want)
	}
}
