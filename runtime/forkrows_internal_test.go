package runtime

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// A fork's rows load in the order of their keys, a row read twice once;
// a key read with two values fails.
func TestForkRowsSorted(t *testing.T) {
	for seed := range uint64(50) {
		forkRowsSorted(t, rand.New(rand.NewPCG(seed, 2)))
	}
}

func forkRowsSorted(t *testing.T, rng *rand.Rand) {
	var f forkRows
	var want []string
	for i := range 500 {
		want = append(want, fmt.Sprintf("k%04d=v%d", i, i))
	}
	// Runs of keys in order, as Scans give them, a key in one or two of
	// them; and empty runs.
	var runs = make([][]int, 1+rng.IntN(7))
	for i := range 500 {
		var r = rng.IntN(len(runs))
		runs[r] = append(runs[r], i)
		if rng.IntN(4) == 0 {
			var r2 = rng.IntN(len(runs))
			runs[r2] = append(runs[r2], i)
		}
	}
	for _, run := range runs {
		f.run()
		for _, i := range slices.Compact(run) {
			f.add(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "v%d", i))
		}
	}
	f.run()
	if err := f.sorted(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k, v := range f.all() {
		got = append(got, string(k)+"="+string(v))
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("rows: %v", got)
	}
	f.run()
	f.add([]byte("k0001"), []byte("other"))
	if err := f.sorted(); err == nil || !strings.Contains(err.Error(), "two values") {
		t.Fatalf("a key of two values: %v", err)
	}
}
