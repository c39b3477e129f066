package rocks

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"github.com/linxGnu/grocksdb"
	"go.gazette.dev/core/broker/client"
)

// A Prefetch reads the committed rows of its keys from the database in one
// MultiGet into the row cache, where Gets find them: present or absent, of
// every length (more than the MultiGet's buffer holds at first), but for
// keys the current transaction wrote, which it shadows until it commits.
// Without a row
// cache, a Prefetch reads nothing, and Gets read the database.
func TestPrefetchFillsTheRowCache(t *testing.T) {
	for _, capacity := range []int64{0, -1} {
		var a = openRecorded(t, newLog(t), 0xA3, Options{RowCacheBytes: capacity})
		var s = a.store
		var value = func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, i*7) }
		for i := range 300 {
			_ = s.Put(fmt.Appendf(nil, "k%03d", i), value(i))
		}
		await(t, s.StartCommit(nil, checkpointAt(1), nil))
		s.DropRowCache()
		_ = s.Put([]byte("k007"), []byte("in the transaction"))

		var p runtime.Prefetch
		for i := range 300 {
			p.Add(fmt.Appendf(p.Append(), "k%03d", i))
		}
		p.Add(append(p.Append(), "absent"...))
		if err := s.Prefetch(&p); err != nil {
			t.Fatal(err)
		}
		// Rows written past the store are seen only by reads of the
		// database, not by those of the row cache.
		var wo = grocksdb.NewDefaultWriteOptions()
		for _, k := range []string{"k001", "k299", "absent"} {
			if err := s.DB().Put(wo, []byte(k), []byte("direct")); err != nil {
				t.Fatal(err)
			}
		}
		wo.Destroy()
		for i := range 300 {
			var k = fmt.Sprintf("k%03d", i)
			var want = value(i)
			switch {
			case k == "k007":
				want = []byte("in the transaction")
			case capacity < 0 && (k == "k001" || k == "k299"):
				want = []byte("direct")
			}
			if v, ok, err := s.Get([]byte(k)); !ok || err != nil || !bytes.Equal(v, want) {
				t.Fatalf("row cache %d: Get(%s) = %q %v %v, want %q", capacity, k, v, ok, err, want)
			}
		}
		var v, ok, err = s.Get([]byte("absent"))
		if err != nil || ok != (capacity < 0) {
			t.Fatalf("row cache %d: Get(absent) = %q %v %v", capacity, v, ok, err)
		}
		// What the prefetch read of the key the transaction wrote gives way
		// to the transaction's write as it commits.
		await(t, s.StartCommit(nil, checkpointAt(2), nil))
		if v, ok, err = s.Get([]byte("k007")); !ok || err != nil || string(v) != "in the transaction" {
			t.Fatalf("row cache %d: Get(k007) after its commit = %q %v %v", capacity, v, ok, err)
		}
		s.Destroy()
	}
}

// A Prefetch reads each key it misses in the row cache once, however often
// its batch holds it, and adds each row it reads to the cache once: a key
// is in one generation of the cache at most, even as the rows it adds turn
// the generations over, and Gets return what the database holds.
func TestPrefetchOfRepeatedKeys(t *testing.T) {
	var a = openRecorded(t, newLog(t), 0xA5, Options{RowCacheBytes: 1200}) // About ten rows a generation.
	var s = a.store
	defer s.Destroy()
	var key = func(i int) []byte { return fmt.Appendf(nil, "k%03d", i) }
	for i := range 40 {
		if i%4 != 3 { // Every fourth key is absent.
			_ = s.Put(key(i), fmt.Appendf(nil, "value of %d", i))
		}
	}
	await(t, s.StartCommit(nil, checkpointAt(1), nil))
	s.DropRowCache()
	var p runtime.Prefetch
	var keys [][]byte
	for i := range 120 {
		var k = key(i * 7 % 40) // Each key three times, apart.
		p.Add(append(p.Append(), k...))
		keys = append(keys, k)
	}
	var hashes = make([]uint64, len(keys))
	for i, k := range keys {
		hashes[i] = txnkv.HashKey(k)
	}
	var read, err = (*database)(s).Prefetch(keys, hashes)
	if err != nil {
		t.Fatal(err)
	} else if read != 40 {
		t.Fatalf("the prefetch read %d keys, want each of the 40 once", read)
	}
	var inOne = func(when string) {
		t.Helper()
		for i := range 40 {
			var h = txnkv.HashKey(key(i))
			if s.rows.cur.find(h, key(i)) >= 0 && s.rows.prev.find(h, key(i)) >= 0 {
				t.Fatalf("%s: %s is in both generations of the row cache", when, key(i))
			}
		}
	}
	inOne("prefetched")
	for i := range 40 {
		var v, ok, err = s.Get(key(i))
		if err != nil || ok != (i%4 != 3) || ok && string(v) != fmt.Sprintf("value of %d", i) {
			t.Fatalf("Get(%s) = %q %v %v", key(i), v, ok, err)
		}
		inOne(fmt.Sprintf("after Get(%s)", key(i)))
	}
	if err = s.Prefetch(&p); err != nil {
		t.Fatal(err)
	}
	inOne("prefetched again")
}

// A store whose prefetch found almost every key at hand (in its row cache)
// passes on the next 15 batches, then prefetches again.
func TestPrefetchBacksOff(t *testing.T) {
	var a = openRecorded(t, newLog(t), 0xA4, Options{})
	var s = a.store
	defer s.Destroy()
	var p runtime.Prefetch
	for i := range 100 {
		var k = fmt.Appendf(nil, "k%03d", i)
		_ = s.Put(k, k)
		p.Add(append(p.Append(), k...))
	}
	await(t, s.StartCommit(nil, checkpointAt(1), nil))
	if !s.Prefetching() {
		t.Fatal("a new store passes on its first batch")
	} else if err := s.Prefetch(&p); err != nil { // Settles the commit first: its rows are at hand.
		t.Fatal(err)
	}
	for i := range 15 {
		if s.Prefetching() {
			t.Fatalf("batch %d after a prefetch of rows all at hand is prefetched", i)
		}
	}
	if !s.Prefetching() {
		t.Fatal("the 16th batch is passed on")
	}
}

// BenchmarkPrefetch reads and writes rows as a consumer of a large key
// space does (the workload large of bench/cmd/bench: a Get and a Put of the
// row of a random key of 125,000 a message, in batches of 1,024 messages
// taken from the shard's readers, committed every 16 batches as pipelined
// transactions commit), without and with a Prefetch of each batch's keys
// first (one MultiGet into the row cache). An op is a message: its Get and
// its Put.
func BenchmarkPrefetch(b *testing.B) {
	for _, prefetch := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefetch=%v", prefetch), func(b *testing.B) {
			var s, err = Open(b.TempDir(), &nopRecorder{}, Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Destroy()
			var rng = rand.New(rand.NewPCG(1, 2))
			var p runtime.Prefetch
			var prev client.OpFuture
			var value = make([]byte, 8)
			b.ResetTimer()
			for done, batch := 0, 1; done < b.N; batch++ {
				var n = min(1024, b.N-done)
				p.Reset()
				for range n {
					p.Add(fmt.Appendf(p.Append(), "sums/%08d", rng.IntN(125_000)))
				}
				if prefetch {
					if err = s.Prefetch(&p); err != nil {
						b.Fatal(err)
					}
				}
				for i := range n {
					var v, _, err = s.Get(p.Key(i))
					if err != nil {
						b.Fatal(err)
					}
					var sum uint64
					if len(v) == 8 {
						sum = binary.BigEndian.Uint64(v)
					}
					binary.BigEndian.PutUint64(value, sum+1)
					if err = s.Put(p.Key(i), value); err != nil {
						b.Fatal(err)
					}
				}
				done += n
				if batch%16 == 0 {
					if prev != nil {
						await(b, prev)
					}
					prev = s.StartCommit(nil, checkpointAt(int64(batch)), nil)
				}
			}
			if prev != nil {
				await(b, prev)
			}
		})
	}
}
