package runtime

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// A fork's rows load in the order of their keys, a row read twice once;
// a key read with two values fails.
func TestForkRowsSorted(t *testing.T) {
	var rng = rand.New(rand.NewPCG(1, 2))
	var f forkRows
	var want []string
	for i := range 500 {
		want = append(want, fmt.Sprintf("k%04d=v%d", i, i))
	}
	for _, i := range rng.Perm(500) {
		f.add(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "v%d", i))
		if rng.IntN(4) == 0 {
			f.add(fmt.Appendf(nil, "k%04d", i), fmt.Appendf(nil, "v%d", i))
		}
	}
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
	f.add([]byte("k0001"), []byte("other"))
	if err := f.sorted(); err == nil || !strings.Contains(err.Error(), "two values") {
		t.Fatalf("a key of two values: %v", err)
	}
}
