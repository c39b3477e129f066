package rocks

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

func TestCRC32CAgreesWithRocksDB(t *testing.T) {
	if !crc32cInterposed() {
		t.Fatal("RocksDB's calls of rocksdb::crc32c::Extend don't reach the program's definition")
	}
	var castagnoli = crc32.MakeTable(crc32.Castagnoli)
	var rng = rand.New(rand.NewPCG(1, 2))
	var buf = make([]byte, 4096+64)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for range 5000 {
		var off = rng.IntN(64)
		var b = buf[off : off+rng.IntN(4096)]
		var init = rng.Uint32()
		var want = crc32.Update(init, castagnoli, b)
		if got := crc32cExtend(init, b); got != want {
			t.Fatalf("Extend(%#x, %d bytes at %d) = %#x, want %#x", init, len(b), off, got, want)
		}
		if got := crc32cTable(init, b); got != want {
			t.Fatalf("the table's Extend(%#x, %d bytes at %d) = %#x, want %#x", init, len(b), off, got, want)
		}
		if own, ok := rocksdbCRC32C(init, b); !ok {
			t.Fatal("RocksDB's own rocksdb::crc32c::Extend not found")
		} else if own != want {
			t.Fatalf("RocksDB's Extend(%#x, %d bytes at %d) = %#x, want %#x", init, len(b), off, own, want)
		}
	}
}

func FuzzCRC32C(f *testing.F) {
	f.Add(uint32(0), []byte("123456789"))
	f.Add(uint32(0xffffffff), []byte{})
	var castagnoli = crc32.MakeTable(crc32.Castagnoli)
	f.Fuzz(func(t *testing.T, init uint32, b []byte) {
		var want = crc32.Update(init, castagnoli, b)
		if got := crc32cExtend(init, b); got != want {
			t.Fatalf("Extend(%#x, %x) = %#x, want %#x", init, b, got, want)
		}
		if got := crc32cTable(init, b); got != want {
			t.Fatalf("the table's Extend(%#x, %x) = %#x, want %#x", init, b, got, want)
		}
		if own, ok := rocksdbCRC32C(init, b); ok && own != want {
			t.Fatalf("RocksDB's Extend(%#x, %x) = %#x, want %#x", init, b, own, want)
		}
	})
}

// BenchmarkCRC32C compares the program's CRC-32C, which RocksDB's calls
// reach, with RocksDB's own, on a record of 1 KiB.
func BenchmarkCRC32C(b *testing.B) {
	var buf = make([]byte, 1024)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	b.Run("program", func(b *testing.B) {
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			crc32cExtend(0, buf)
		}
	})
	b.Run("rocksdb", func(b *testing.B) {
		if _, ok := rocksdbCRC32C(0, buf); !ok {
			b.Fatal("RocksDB's own rocksdb::crc32c::Extend not found")
		}
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			rocksdbCRC32C(0, buf)
		}
	})
}
