package rocks

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/linxGnu/grocksdb"
)

// BenchmarkFlushTogether times flushes of the memtables of two stores at
// once, as a rescale's two parents in one member flush ahead of their
// links: each memtable holds 20 MB of rows of some 150 bytes, unflushed.
// An operation is both flushes, from their start until both ended; the
// memtables are filled anew for each, untimed. The sub-benchmarks set the
// process's pool of flush threads (RocksDB's high-priority pool, shared
// by every database of the process) to 1 and to 2.
func BenchmarkFlushTogether(b *testing.B) {
	sizeFlushThreads() // Before the sub-benchmarks set it, as the first open would.
	var env = grocksdb.NewDefaultEnv()
	defer env.Destroy()
	defer env.SetHighPriorityBackgroundThreads(env.GetHighPriorityBackgroundThreads())
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("threads=%d", threads), func(b *testing.B) {
			b.StopTimer() // Until the flushes.
			env.SetHighPriorityBackgroundThreads(threads)
			var stores []*Store
			for range 2 {
				var s, err = Open(filepath.Join(b.TempDir(), "s"), &nopRecorder{}, Options{
					Tune: func(o *grocksdb.Options) { o.SetWriteBufferSize(64 << 20) },
				})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Destroy()
				stores = append(stores, s)
			}
			var cp int64
			for range b.N {
				for _, s := range stores {
					for i := 0; walBytesIn(s.dir) < 20<<20; i += 2000 {
						commitAccounts(b, s, i, i+2000, cp)
						cp++
					}
				}
				b.StartTimer()
				for _, s := range stores {
					s.FlushAhead()
				}
				for _, s := range stores {
					if err := s.awaitFlush(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
			}
		})
	}
}
