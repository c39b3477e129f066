package rocks

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gazconsumer/gazconsumer/store/txnkv"
)

// FuzzRowCache runs programs of puts and gets against a cache and checks
// that it returns only what was last put, keeps its byte accounting within
// a generation's budget, and always holds the key put or read last.
func FuzzRowCache(f *testing.F) {
	f.Add(uint16(300), []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add(uint16(200), []byte{0x10, 0x90, 0x11, 0x91, 0xf0, 0x10, 0x12, 0x13, 0x14, 0x90})
	f.Add(uint16(900), []byte{0x71, 0x81, 0x31, 0x81, 0x72, 0x62, 0x82, 0x73, 0x83, 0x03, 0x83})
	f.Fuzz(func(t *testing.T, capacity uint16, program []byte) {
		var c = newRowCache(int64(capacity))
		if c == nil {
			return
		}
		var model = make(map[string][]byte) // The database.
		for i, op := range program {
			var k = fmt.Sprintf("key%d", op&0x0f)
			switch {
			case op&0xf0 == 0x70: // Delete: the row is cached as absent.
				delete(model, k)
				c.put([]byte(k), nil, true)
			case op&0x80 == 0: // Put a value of 0..6 bytes.
				var v = bytes.Repeat([]byte{byte(i)}, int(op>>4))
				model[k] = v
				c.put([]byte(k), v, false)
			default: // Get.
				var want, in = model[k]
				if r, ok := c.get([]byte(k)); ok {
					if r.absent != !in || !bytes.Equal(r.value, want) {
						t.Fatalf("op %d: get(%s) = %q (absent %v), database holds %q (%v)", i, k, r.value, r.absent, want, in)
					}
				} else if len(k)+max(len(want), maxReserve)+rowOverhead <= c.half {
					c.put([]byte(k), want, !in) // As Store.Get does after reading the database.
				}
			}
			for _, g := range []*generation{c.cur, c.prev} {
				if n := g.arena.used() + g.rows*(rowOverhead-rowHeader); n != g.bytes || n > c.half {
					t.Fatalf("op %d: a generation holds %d bytes, accounts %d, budget %d", i, n, g.bytes, c.half)
				}
			}
			if v, in := model[k]; len(k)+max(len(v), maxReserve)+rowOverhead <= c.half {
				var j = c.cur.find(txnkv.HashKey([]byte(k)), []byte(k))
				if j < 0 || !bytes.Equal(c.cur.row(j).value, v) || c.cur.row(j).absent == in {
					t.Fatalf("op %d: %s, just used, is not in the current generation", i, k)
				}
			}
		}
	})
}

// BenchmarkRowCacheWide fills a cache of 32 MiB (a shard's, by default)
// with rows of 1 KiB keys, as a consumer of `wide` does (bench/cmd/bench):
// an operation is 250,000 messages of keys of 50,000 at random, without
// their handlers' Gets (see cacheMessage). It reports the bytes allocated,
// which a generation's arena grown by copying multiplied.
func BenchmarkRowCacheWide(b *testing.B) {
	var keys = benchKeys(50_000, "%01000d")
	var rng = rand.New(rand.NewPCG(1, 2))
	var value = []byte("123456789")
	b.ReportAllocs()
	for b.Loop() {
		var c = newRowCache(32 << 20)
		for range 250_000 {
			cacheMessage(b, c, keys[rng.IntN(len(keys))], value, false)
		}
	}
}

// BenchmarkRowCacheLarge runs a cache of 4 MiB over 125,000 short keys, as
// a shard of `large` (bench/cmd/bench) does: a message at an operation,
// its handler's Get included (see cacheMessage).
func BenchmarkRowCacheLarge(b *testing.B) {
	var keys = benchKeys(125_000, "\x12key-%07d\x00")
	var rng = rand.New(rand.NewPCG(3, 4))
	var value = []byte("\x08\x96\x01")
	var c = newRowCache(4 << 20)
	b.ReportAllocs()
	for b.Loop() {
		cacheMessage(b, c, keys[rng.IntN(len(keys))], value, true)
	}
}

// benchKeys returns n keys, the i-th format of i.
func benchKeys(n int, format string) [][]byte {
	var keys = make([][]byte, n)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, format, i)
	}
	return keys
}

// cacheMessage does to c what a shard does for a message of key k: a
// lookup as its Prefetch makes (adding the row read from the database if
// the cache lacks it), another as its handler's Get if getAgain, and a put
// of value as its commit.
func cacheMessage(b *testing.B, c *rowCache, k, value []byte, getAgain bool) {
	var h = txnkv.HashKey(k)
	if _, ok := c.getHashed(k, h); !ok {
		c.addHashed(k, h, value, false)
	}
	if getAgain {
		if _, ok := c.getHashed(k, h); !ok {
			b.Fatal("a row just added is not cached")
		}
	}
	c.putHashed(k, h, value, false)
}
