package txnkv_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gazconsumer/gazconsumer/store/txnkv"
)

// BenchmarkOverlayGet looks keys up in an overlay still being written, as a
// handler's Get does in its transaction's writes before it reads further:
// one key in eight is in the overlay, as in a transaction of a large key
// space, where most keys a message reads were not yet written by the
// transaction. The overlay's filter answers most of the others without a
// look at its map, which an overlay of many entries holds in memory the
// processor's caches mostly miss.
func BenchmarkOverlayGet(b *testing.B) {
	for _, entries := range []int{512, 32 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("entries=%d", entries), func(b *testing.B) {
			var o = txnkv.NewOverlay()
			defer o.Release()
			for i := range entries {
				o.Put(fmt.Appendf(nil, "key-%09d", i*8), []byte("value"))
			}
			var rng = rand.New(rand.NewPCG(1, 2))
			var keys = make([][]byte, 1<<18) // More than the caches hold of the overlay.
			var hashes = make([]uint64, len(keys))
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "key-%09d", rng.IntN(entries*8))
				hashes[i] = txnkv.HashKey(keys[i])
			}
			var found int
			b.ResetTimer()
			for i := range b.N {
				var k = i % len(keys)
				if _, ok := o.GetHashed(keys[k], hashes[k]); ok {
					found++
				}
			}
			b.ReportMetric(float64(found)/float64(b.N), "found/op")
		})
	}
}
