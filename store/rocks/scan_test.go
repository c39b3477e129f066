package rocks

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/linxGnu/grocksdb"
)

// scanDB is a database of the tests of scan, in a directory of t's.
type scanDB struct {
	db *grocksdb.DB
	ro *grocksdb.ReadOptions
	wo *grocksdb.WriteOptions
}

func openScanDB(t testing.TB) *scanDB {
	t.Helper()
	var opts = grocksdb.NewDefaultOptions()
	opts.SetCreateIfMissing(true)
	var db, err = grocksdb.OpenDb(opts, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var d = &scanDB{db: db, ro: grocksdb.NewDefaultReadOptions(), wo: grocksdb.NewDefaultWriteOptions()}
	t.Cleanup(func() { d.db.Close(); d.ro.Destroy(); d.wo.Destroy(); opts.Destroy() })
	return d
}

// scan scans [start, end) of d, stopping after stop rows if stop > 0.
func (d *scanDB) scan(t testing.TB, start, end []byte, stop int) []string {
	t.Helper()
	var cdb, cro, err = cHandles(d.db, d.ro)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	if err = scan(cdb, cro, start, end, func(k, v []byte) bool {
		got = append(got, string(k)+"="+string(v))
		return stop == 0 || len(got) < stop
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// scanModel returns the rows of rows in [start, end), in key order, the
// first stop of them if stop > 0.
func scanModel(rows map[string]string, start, end []byte, stop int) []string {
	var keys []string
	for k := range rows {
		if k >= string(start) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if stop > 0 && len(keys) > stop {
		keys = keys[:stop]
	}
	var out []string
	for _, k := range keys {
		out = append(out, k+"="+rows[k])
	}
	return out
}

// A scan returns the rows of its range, in order, across the batches it
// copies them in (rows larger than a batch too), and stops when told.
func TestScanBatches(t *testing.T) {
	var d = openScanDB(t)
	var rng = rand.New(rand.NewPCG(1, 2))
	var rows = make(map[string]string)
	var wb = grocksdb.NewWriteBatch()
	defer wb.Destroy()
	for i := range 6000 {
		var k = fmt.Sprintf("k%05d", rng.IntN(20000))
		var v = strings.Repeat(string(rune('a'+i%26)), rng.IntN(200))
		if i%1000 == 7 {
			v = strings.Repeat("L", scanBatch+rng.IntN(scanBatch)) // Larger than a batch.
		}
		rows[k] = v
		wb.Put([]byte(k), []byte(v))
	}
	wb.Put([]byte{}, []byte("empty key")) // The least key.
	rows[""] = "empty key"
	if err := d.db.Write(d.wo, wb); err != nil {
		t.Fatal(err)
	}
	var check = func(start, end []byte, stop int) {
		t.Helper()
		var got, want = d.scan(t, start, end, stop), scanModel(rows, start, end, stop)
		if !slices.Equal(got, want) {
			t.Fatalf("scan [%q, %q) stop %d: %d rows, want %d (first differing at %d)", start, end, stop, len(got), len(want), firstDiff(got, want))
		}
	}
	check(nil, nil, 0)
	check([]byte("k1"), []byte("k2"), 0)
	check([]byte("k19999"), nil, 0)
	check([]byte("z"), nil, 0)
	check([]byte("k1"), []byte("k1"), 0)
	for range 200 {
		var a, b = []byte(fmt.Sprintf("k%05d", rng.IntN(21000))), []byte(fmt.Sprintf("k%05d", rng.IntN(21000)))
		if bytes.Compare(a, b) > 0 {
			a, b = b, a
		}
		check(a, b, rng.IntN(3)*rng.IntN(500))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// FuzzScan checks scans of fuzzed rows and ranges against a model.
func FuzzScan(f *testing.F) {
	f.Add([]byte("a\x00b\x01bb\x00c"), []byte("a"), []byte("c"), uint16(0), uint32(10))
	f.Add([]byte("\x00\x00\x00"), []byte(""), []byte(""), uint16(1), uint32(scanBatch+1))
	var d = openScanDB(f)
	f.Fuzz(func(t *testing.T, keys, start, end []byte, stop uint16, big uint32) {
		var rows = make(map[string]string)
		var wb = grocksdb.NewWriteBatch()
		defer wb.Destroy()
		for i, k := range bytes.Split(keys, []byte{0}) {
			var v = fmt.Sprint(i)
			if i == 1 {
				v = strings.Repeat("v", int(big%(3*scanBatch)))
			}
			rows[string(k)] = v
			wb.Put(k, []byte(v))
		}
		if err := d.db.Write(d.wo, wb); err != nil {
			t.Fatal(err)
		}
		defer func() {
			var del = grocksdb.NewWriteBatch()
			defer del.Destroy()
			for k := range rows {
				del.Delete([]byte(k))
			}
			if err := d.db.Write(d.wo, del); err != nil {
				t.Fatal(err)
			}
		}()
		var e = end
		if len(end) == 0 {
			e = nil
		}
		var got, want = d.scan(t, start, e, int(stop)), scanModel(rows, start, e, int(stop))
		if !slices.Equal(got, want) {
			t.Fatalf("scan [%q, %q) stop %d: %d rows, want %d (first differing at %d)", start, e, stop, len(got), len(want), firstDiff(got, want))
		}
	})
}

// BenchmarkScan scans 200,000 rows of 30-byte keys and 80-byte values: with
// scan's batches, and with grocksdb's iterator, a call into C for each of
// a row's Valid, Key, Value and Next, as Scans did before.
func BenchmarkScan(b *testing.B) {
	const rows = 200_000
	var d = openScanDB(b)
	var wb = grocksdb.NewWriteBatch()
	var value = make([]byte, 80)
	for i := range rows {
		wb.Put(fmt.Appendf(nil, "account/customer-%07d/%d", i/4, i%4), value)
	}
	if err := d.db.Write(d.wo, wb); err != nil {
		b.Fatal(err)
	}
	wb.Destroy()
	var count = func(b *testing.B, n int) {
		if n != rows {
			b.Fatalf("scanned %d rows, want %d", n, rows)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows), "ns/row")
	}
	b.Run("batches", func(b *testing.B) {
		var cdb, cro, _ = cHandles(d.db, d.ro)
		var n int
		for range b.N {
			n = 0
			if err := scan(cdb, cro, []byte("account/"), []byte("account0"), func(k, v []byte) bool { n++; return true }); err != nil {
				b.Fatal(err)
			}
		}
		count(b, n)
	})
	b.Run("grocksdb-iterator", func(b *testing.B) {
		var n int
		for range b.N {
			n = 0
			var it = d.db.NewIterator(d.ro)
			for it.Seek([]byte("account/")); it.Valid(); it.Next() {
				if bytes.Compare(it.Key().Data(), []byte("account0")) >= 0 {
					break
				}
				_ = it.Value().Data()
				n++
			}
			if err := it.Err(); err != nil {
				b.Fatal(err)
			}
			it.Close()
		}
		count(b, n)
	})
}
