package rocks

import (
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gazconsumer/gazconsumer/runtime"
)

// rowsOf yields the rows of keys, in order, of values made of their keys.
func rowsOf(keys []string) iter.Seq2[[]byte, []byte] {
	return func(yield func(k, v []byte) bool) {
		for _, k := range keys {
			if !yield([]byte(k), []byte(strings.Repeat(k, 3))) {
				return
			}
		}
	}
}

// Rows loaded into a new store are read by its transactions, and, with the
// checkpoint committed after them, by a store played back from its
// recovery log; loaded again, they replace those loaded before; rows out of
// order, or a load into a store that committed, are refused.
func TestLoadIsRecorded(t *testing.T) {
	var journal = newLog(t)
	var a = openRecorded(t, journal, 0xC1, Options{})
	defer a.store.Destroy()

	var rng = rand.New(rand.NewPCG(7, 8))
	var keys []string
	for i := 0; len(keys) < 5000; i += 1 + rng.IntN(3) {
		keys = append(keys, fmt.Sprintf("row/%06d", i))
	}
	// A Get before the load caches the row's absence.
	if _, ok, err := a.store.Get([]byte(keys[0])); ok || err != nil {
		t.Fatalf("Get before the load: %v, %v", ok, err)
	}
	if _, err := runtime.LoadRows(a.store, rowsOf([]string{"b", "a"})); err == nil || !strings.Contains(err.Error(), `"a" after "b"`) {
		t.Fatalf("rows out of order: %v", err)
	}
	if _, err := runtime.LoadRows(a.store, rowsOf([]string{"a", "a"})); err == nil {
		t.Fatal("a row twice: no error")
	}
	for range 2 { // A second load, as of a fork run again, replaces the first's rows.
		if n, err := runtime.LoadRows(a.store, rowsOf(keys)); err != nil || n != len(keys) {
			t.Fatalf("Load: %d, %v", n, err)
		}
	}
	if n, err := runtime.LoadRows(a.store, rowsOf(nil)); err != nil || n != 0 {
		t.Fatalf("Load of no rows: %d, %v", n, err)
	}
	var want = make(map[string]string)
	for _, k := range keys {
		want[k] = strings.Repeat(k, 3)
	}
	if got := contents(t, a.store); !mapsEqual(got, want) {
		t.Fatalf("after the load, the store holds %d keys, want %d", len(got), len(want))
	}
	if v, ok, err := a.store.Get([]byte(keys[0])); !ok || err != nil || string(v) != want[keys[0]] {
		t.Fatalf("Get after the load: %q, %v, %v", v, ok, err)
	}
	if err := a.store.Put([]byte("row/x"), []byte("committed")); err != nil {
		t.Fatal(err)
	}
	want["row/x"] = "committed"
	await(t, a.store.StartCommit(nil, checkpointAt(9), nil))
	if _, err := runtime.LoadRows(a.store, rowsOf([]string{"z"})); err == nil || !strings.Contains(err.Error(), "has committed") {
		t.Fatalf("a load after a commit: %v", err)
	}

	var b = openRecorded(t, journal, 0xC2, Options{})
	defer b.store.Destroy()
	if got := readThrough(t, b.store); got != 9 {
		t.Fatalf("played-back checkpoint reads through %d, want 9", got)
	}
	if got := contents(t, b.store); !mapsEqual(got, want) {
		t.Fatalf("played-back store holds %d keys, want %d", len(got), len(want))
	}
}

// A load aborted, as of a fork whose read of its parent's state turned out
// not durable, leaves neither rows nor its table file, in the store or in
// a store played back from its recovery log; the load begun after it is
// the one the store holds; a load ended takes no more rows.
func TestLoadAborted(t *testing.T) {
	var journal = newLog(t)
	var a = openRecorded(t, journal, 0xD1, Options{})
	defer a.store.Destroy()

	var l, err = a.store.BeginLoad()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"row/1", "row/2", "row/3"} {
		if err = l.Add([]byte(k), []byte("aborted")); err != nil {
			t.Fatal(err)
		}
	}
	if err = l.Add([]byte("row/0"), nil); err == nil || !strings.Contains(err.Error(), `"row/0" after "row/3"`) {
		t.Fatalf("a row out of order: %v", err)
	}
	l.Abort()
	l.Abort() // Again: nothing.
	if err = l.Add([]byte("row/4"), nil); err == nil {
		t.Fatal("a row added to an aborted load: no error")
	} else if _, err = l.Finish(); err == nil {
		t.Fatal("an aborted load finished: no error")
	}
	if _, err = os.Stat(filepath.Join(a.dir, loadFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the aborted load's table file: %v", err)
	}
	if got := contents(t, a.store); len(got) != 0 {
		t.Fatalf("after an aborted load, the store holds %v", got)
	}
	if n, err := runtime.LoadRows(a.store, rowsOf([]string{"row/2", "row/5"})); err != nil || n != 2 {
		t.Fatalf("Load: %d, %v", n, err)
	}
	await(t, a.store.StartCommit(nil, checkpointAt(3), nil))
	var want = map[string]string{"row/2": "row/2row/2row/2", "row/5": "row/5row/5row/5"}
	if got := contents(t, a.store); !mapsEqual(got, want) {
		t.Fatalf("the store holds %v, want %v", got, want)
	}
	var b = openRecorded(t, journal, 0xD2, Options{})
	defer b.store.Destroy()
	if got := contents(t, b.store); !mapsEqual(got, want) {
		t.Fatalf("played back, the store holds %v, want %v", got, want)
	}
}
