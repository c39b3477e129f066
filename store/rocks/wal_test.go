package rocks

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/linxGnu/grocksdb"
)

// realWAL has RocksDB write a write-ahead log of records of random sizes,
// some longer than a block (written as walFirst, walMiddle..., walLast
// records) and some sized to end within a header's length of their block's
// end (the next record then begins past a trailer of zeros), and returns
// its bytes and the offsets at which its records end, as RocksDB wrote them.
func realWAL(t testing.TB, seed uint64) ([]byte, []int) {
	t.Helper()
	var dir = t.TempDir()
	var opts = grocksdb.NewDefaultOptions()
	defer opts.Destroy()
	opts.SetCreateIfMissing(true)
	opts.SetWriteBufferSize(64 << 20)
	var db, err = grocksdb.OpenDb(opts, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var wo = grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) != 1 {
		t.Fatalf("the database has write-ahead logs %v (%v); want one", logs, err)
	}
	var size = func() int {
		var fi, err = os.Stat(logs[0])
		if err != nil {
			t.Fatal(err)
		}
		return int(fi.Size())
	}

	var rng = rand.New(rand.NewPCG(seed, 1))
	var ends []int
	var key = []byte("key-000")
	for i := 0; size() < 1<<20; i++ {
		key[4], key[5], key[6] = byte('0'+i%10), byte('0'+i/10%10), byte('0'+i/100%10)
		var n int
		switch at := size() % walBlockSize; rng.IntN(4) {
		case 0:
			n = rng.IntN(70_000) // Over blocks, likely.
		case 1:
			// A value such that the record (a header, then a batch of one
			// put: 12 bytes of header, a byte of type, the key and the
			// value with their lengths' varints) ends 1 to 6 bytes before
			// its block does.
			var room = walBlockSize - at - walHeaderSize - (1 + rng.IntN(walHeaderSize-1))
			n = room - 12 - 1 - 1 - len(key) - binary.PutUvarint(make([]byte, 10), uint64(max(room, 0)))
			if n < 0 || binary.PutUvarint(make([]byte, 10), uint64(n)) != binary.PutUvarint(make([]byte, 10), uint64(max(room, 0))) {
				n = rng.IntN(100) // No room: a small one.
			}
		default:
			n = rng.IntN(2000)
		}
		var value = make([]byte, n)
		for j := range value {
			value[j] = byte(rng.Uint32())
		}
		if err := db.Put(wo, key, value); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, size())
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	var trailers, spanning int
	for i, e := range ends {
		if left := walBlockSize - e%walBlockSize; left < walHeaderSize && i+1 < len(ends) {
			trailers++
		}
		if i > 0 && e/walBlockSize > ends[i-1]/walBlockSize+1 {
			spanning++
		}
	}
	if trailers == 0 || spanning == 0 {
		t.Fatalf("the log has %d records followed by a trailer, %d over a whole block: want some of each", trailers, spanning)
	}
	return b, ends
}

// walWholeAt is what wholeWAL of the first c bytes of a log whose records
// end at ends must be: true where a record ends, or a trailer after one.
func walWholeAt(ends []int, c int) bool {
	if c == 0 {
		return true
	}
	var i, found = slices.BinarySearch(ends, c)
	if found {
		return true
	}
	// A trailer, if c ends a block: the next record's first bytes, its
	// header not yet written.
	return i > 0 && c%walBlockSize == 0 && c-ends[i-1] < walHeaderSize
}

func TestWholeWAL(t *testing.T) {
	var wal, ends = realWAL(t, 1)
	var cuts = []int{0, len(wal)}
	for _, e := range ends {
		for d := -walHeaderSize - 1; d <= walHeaderSize+1; d++ {
			cuts = append(cuts, e+d)
		}
	}
	for b := walBlockSize; b < len(wal); b += walBlockSize {
		for d := -walHeaderSize - 1; d <= walHeaderSize+1; d++ {
			cuts = append(cuts, b+d)
		}
	}
	var rng = rand.New(rand.NewPCG(2, 2))
	for range 500 {
		cuts = append(cuts, rng.IntN(len(wal)+1))
	}
	var whole int
	for _, c := range cuts {
		if c < 0 || c > len(wal) {
			continue
		}
		var want = walWholeAt(ends, c)
		if got := wholeWAL(wal[:c]); got != want {
			t.Fatalf("wholeWAL of the log's first %d bytes (of %d) is %t, want %t", c, len(wal), got, want)
		}
		if want {
			whole++
		}
	}
	t.Logf("%d records, %d bytes: %d cuts, %d of them whole", len(ends), len(wal), len(cuts), whole)

	// A byte changed anywhere makes a log not whole.
	for range 500 {
		var b = slices.Clone(wal)
		var at = rng.IntN(len(b))
		b[at] ^= byte(1 + rng.IntN(255))
		if wholeWAL(b) {
			t.Fatalf("wholeWAL of the log with its byte %d changed is true", at)
		}
	}
}

func FuzzWholeWAL(f *testing.F) {
	var wal, ends = realWAL(f, 3)
	f.Add(uint32(0), uint32(0), byte(0), []byte(nil))
	f.Add(uint32(ends[len(ends)/2]), uint32(17), byte(1), wal[:64])
	f.Add(uint32(len(wal)), uint32(walBlockSize-3), byte(0x80), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, cut, at uint32, flip byte, junk []byte) {
		var c = int(cut % uint32(len(wal)+1))
		if got, want := wholeWAL(wal[:c]), walWholeAt(ends, c); got != want {
			t.Fatalf("wholeWAL of the log's first %d bytes is %t, want %t", c, got, want)
		}
		if c > 0 && flip != 0 {
			var b = slices.Clone(wal[:c])
			b[int(at)%c] ^= flip
			if wholeWAL(b) {
				t.Fatalf("wholeWAL of the log's first %d bytes, byte %d changed, is true", c, int(at)%c)
			}
		}
		// Anything, past a whole log: never a panic.
		_ = wholeWAL(append(slices.Clone(wal[:c]), junk...))
		_ = wholeWAL(junk)
	})
}
