package rocks

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"strings"
	"testing"
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
	if _, err := a.store.Load(rowsOf([]string{"b", "a"})); err == nil || !strings.Contains(err.Error(), `"a" after "b"`) {
		t.Fatalf("rows out of order: %v", err)
	}
	if _, err := a.store.Load(rowsOf([]string{"a", "a"})); err == nil {
		t.Fatal("a row twice: no error")
	}
	for range 2 { // A second load, as of a fork run again, replaces the first's rows.
		if n, err := a.store.Load(rowsOf(keys)); err != nil || n != len(keys) {
			t.Fatalf("Load: %d, %v", n, err)
		}
	}
	if n, err := a.store.Load(rowsOf(nil)); err != nil || n != 0 {
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
	if _, err := a.store.Load(rowsOf([]string{"z"})); err == nil || !strings.Contains(err.Error(), "has committed") {
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
