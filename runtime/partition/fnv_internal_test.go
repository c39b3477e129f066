package partition

import (
	"hash/fnv"
	"testing"
)

// FuzzFNV32a: the hash of Index is hash/fnv's 32-bit FNV-1a.
func FuzzFNV32a(f *testing.F) {
	f.Add([]byte(""))
	f.Add([]byte("customer-0001"))
	f.Add([]byte{0, 0xff, 0x12})
	f.Fuzz(func(t *testing.T, b []byte) {
		var h = fnv.New32a()
		_, _ = h.Write(b)
		if got, want := fnv32a(b), h.Sum32(); got != want {
			t.Fatalf("fnv32a(%x) = %d, hash/fnv says %d", b, got, want)
		}
	})
}
