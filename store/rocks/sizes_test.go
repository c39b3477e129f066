package rocks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestApproximateSizes checks the store's estimates of ranges of keys: none
// of rows in its memtables; of rows in its files, in proportion to them, and
// none of a range holding none; and an error once the store is destroyed.
func TestApproximateSizes(t *testing.T) {
	var s, err = Open(t.TempDir(), &nopRecorder{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var rng = rand.New(rand.NewPCG(1, 2))
	var value = make([]byte, 500)
	for prefix, n := range map[string]int{"a/": 1000, "b/": 3000} {
		for i := range n {
			for j := range value {
				value[j] = byte(rng.Uint32()) // Incompressible.
			}
			if err = s.Put(fmt.Appendf(nil, "%s%05d", prefix, i), value); err != nil {
				t.Fatal(err)
			}
		}
	}
	await(t, s.StartCommit(nil, checkpointAt(1), nil))
	var ranges = [][2][]byte{{[]byte("a/"), []byte("a0")}, {[]byte("b/"), []byte("b0")}, {[]byte("c/"), []byte("c0")}, {[]byte("b/01500"), []byte("b0")}}
	var check = func(where string) {
		t.Helper()
		var sizes, err = s.ApproximateSizes(ranges)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %v", where, sizes)
		var a, b, c, half = float64(sizes[0]), float64(sizes[1]), sizes[2], float64(sizes[3])
		if a < 1000*500/2 || a > 1000*600*2 {
			t.Errorf("%s: %v bytes of 1000 rows of 500 bytes", where, a)
		} else if b/a < 2 || b/a > 4.5 {
			t.Errorf("%s: %v bytes of 3000 rows against %v of 1000", where, b, a)
		} else if c != 0 {
			t.Errorf("%s: %d bytes of a range holding no row", where, c)
		} else if half/b < 0.3 || half/b > 0.7 {
			t.Errorf("%s: %v bytes of the last 1500 of 3000 rows, of %v", where, half, b)
		}
	}
	if sizes, err := s.ApproximateSizes(ranges); err != nil {
		t.Fatal(err)
	} else if sizes[0]+sizes[1]+sizes[2]+sizes[3] != 0 {
		t.Fatalf("sizes %v of rows in the memtable; want none", sizes)
	}

	s.FlushAhead()
	var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err = s.awaitFlush(ctx); err != nil {
		t.Fatal(err)
	} else if got := s.DB().GetProperty("rocksdb.num-entries-active-mem-table"); got != "0" {
		t.Fatalf("%s rows in the memtable after the flush", got)
	}
	check("in files")

	s.Destroy()
	if _, err = s.ApproximateSizes(ranges); err == nil {
		t.Fatal("no error from a destroyed store")
	}
}
