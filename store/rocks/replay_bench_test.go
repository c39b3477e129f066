package rocks

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/linxGnu/grocksdb"
)

// BenchmarkOpenReplaysLog times what a store's open costs beside its
// recovery log's playback, as a standby becomes primary after a crash:
// RocksDB replaying a write-ahead log of 60 MiB that its memtable of 64
// MiB never flushed, of rows of about 100 bytes written in commits of
// 2,000. Hot rows are 20,000 rewritten in place; new rows are a million,
// most met once, each an insert into the memtable's skip list.
func BenchmarkOpenReplaysLog(b *testing.B) {
	for _, bc := range []struct {
		name string
		keys int
	}{{"hot-rows", 20_000}, {"new-rows", 1_000_000}} {
		b.Run(bc.name, func(b *testing.B) {
			const mib = 1 << 20
			var o = Options{Tune: func(o *grocksdb.Options) { o.SetWriteBufferSize(64 * mib) }}
			var src = filepath.Join(b.TempDir(), "src")
			var s, err = Open(src, &nopRecorder{}, o)
			if err != nil {
				b.Fatal(err)
			}
			var value = make([]byte, 100)
			for i := 0; walBytesIn(src) < 60*mib; i++ {
				for k := range 2000 {
					value[0], value[1] = byte(i), byte(i>>8)
					var key = fmt.Appendf(nil, "customer-%07d/account", (i*7919+k)%bc.keys)
					if err := s.Put(key, value); err != nil {
						b.Fatal(err)
					}
				}
				await(b, s.StartCommit(nil, checkpointAt(int64(i)), nil))
			}
			s.close() // Its memtable unflushed, as a crash leaves it.
			b.SetBytes(walBytesIn(src))
			b.ResetTimer()

			for range b.N {
				b.StopTimer()
				var dir = filepath.Join(b.TempDir(), "db")
				if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				var s, err = Open(dir, &nopRecorder{}, o)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				s.Destroy()
				b.StartTimer()
			}
		})
	}
}
