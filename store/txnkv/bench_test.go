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

// BenchmarkOverlayCommit writes a transaction's keys to an overlay, scans
// a narrow range of it at its end, as a consumer that keeps time reads
// what fell due as the transaction commits, then freezes it and ascends
// it whole, as its commit's batch does: the narrow scan passes over the
// entries, and the commit sorts them once, rather than the scan index them
// all.
func BenchmarkOverlayCommit(b *testing.B) {
	for _, entries := range []int{4 << 10, 64 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("entries=%d", entries), func(b *testing.B) {
			var rng = rand.New(rand.NewPCG(1, 2))
			var keys, perm = make([][]byte, entries), rng.Perm(entries)
			for i := range keys {
				keys[i] = fmt.Appendf(nil, "\x02table-%09d", perm[i])
			}
			var start, end = []byte("\x01due-0"), []byte("\x01due-1")
			for b.Loop() {
				var o = txnkv.NewOverlay()
				for _, k := range keys {
					o.Put(k, []byte("value"))
				}
				var due int
				o.Ascend(start, end, func(txnkv.Entry) bool { due++; return true })
				o.Freeze()
				var n int
				o.Ascend(nil, nil, func(txnkv.Entry) bool { n++; return true })
				if due != 0 || n != entries {
					b.Fatalf("scanned %d due and %d in all, want 0 and %d", due, n, entries)
				}
				o.Release()
			}
		})
	}
}

// BenchmarkNarrowScans scans, as the runtime fires what falls due at a
// transaction's end, a narrow range of keys of one first byte (the index
// of what falls due) in an overlay of a transaction which wrote many rows
// of tables (keys of another first byte): a scan of the due entries, then a
// write of each, in batches, until none is left, as runtime.Adapter.Fire
// does, in batches of 256 entries, or of twice as many as the batch before.
func BenchmarkNarrowScans(b *testing.B) {
	for _, rows := range []int{10 << 10, 200 << 10} {
		for _, doubling := range []bool{false, true} {
			b.Run(fmt.Sprintf("rows=%d/doubling=%t", rows, doubling), func(b *testing.B) {
				const due = 16 << 10
				for b.Loop() {
					b.StopTimer()
					var o = txnkv.NewOverlay()
					for i := range rows {
						o.Put(fmt.Appendf(nil, "\x12table\x00\x01customer-%09d\x00\x01", i*7919%rows), []byte("a row's value"))
					}
					for i := range due / 4 {
						o.Put(fmt.Appendf(nil, "\x01gazconsumer/due/%09d", i), nil)
					}
					var base [][]byte // What falls due in the store: the overlay deletes each it fires.
					for i := range due {
						base = append(base, fmt.Appendf(nil, "\x01gazconsumer/due/%09d", i))
					}
					b.StartTimer()
					var start = []byte("\x01gazconsumer/due/")
					var end = []byte("\x01gazconsumer/due0")
					for batch := 256; ; {
						var keys [][]byte
						o.Ascend(start, end, func(e txnkv.Entry) bool {
							keys = append(keys, e.Key)
							return len(keys) < batch
						})
						for _, k := range base[:min(batch, len(base))] {
							o.Delete(k)
							o.Put(fmt.Appendf(nil, "\x12table\x00\x01fired-%s", k), []byte("fired"))
						}
						if len(base) <= batch {
							break
						}
						base, start = base[batch:], append(base[batch-1], 0)
						if doubling {
							batch = min(2*batch, 16<<10)
						}
					}
					b.StopTimer()
					o.Release()
					b.StartTimer()
				}
			})
		}
	}
}
