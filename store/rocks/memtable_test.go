package rocks

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/linxGnu/grocksdb"
)

// memtableOptions are a store's memtable options, with statistics, and a
// memtable large enough that it flushes only when asked to.
func memtableOptions() *grocksdb.Options {
	var o = grocksdb.NewDefaultOptions()
	o.SetCreateIfMissing(true)
	o.SetAllowConcurrentMemtableWrites(false)
	o.SetInplaceUpdateSupport(true)
	o.SetMemTablePrefixBloomSizeRatio(DefaultMemtableBloomRatio)
	o.SetMemtableWholeKeyFiltering(true)
	o.SetWriteBufferSize(64 << 20)
	o.EnableStatistics()
	return o
}

// keysUpdated is RocksDB's count of the rows o's database updated in place.
func keysUpdated(t testing.TB, o *grocksdb.Options) int {
	var m = regexp.MustCompile(`(?m)^rocksdb\.number\.keys\.updated COUNT : (\d+)$`).FindStringSubmatch(o.GetStatisticsString())
	if m == nil {
		t.Fatal("statistics have no rocksdb.number.keys.updated")
	}
	var n, err = strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStoreMemtablesKeepAFilterOfTheirKeys(t *testing.T) {
	var optionsFile = func(t *testing.T, dir string) string {
		var names, err = filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
		if err != nil || len(names) == 0 {
			t.Fatalf("no OPTIONS file in %s (%v)", dir, err)
		}
		b, err := os.ReadFile(names[len(names)-1])
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name string
		tune func(*grocksdb.Options)
		want string
	}{
		{"defaults", nil, "GazconsumerFilteredSkipListFactory"},
		// The filter serves only in-place updates, and only RocksDB's skip list.
		{"no in-place updates", func(o *grocksdb.Options) { o.SetInplaceUpdateSupport(false) }, "SkipListFactory"},
		{"another memtable", func(o *grocksdb.Options) { o.SetMemtableVectorRep() }, "VectorRepFactory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dir = t.TempDir()
			var s, err = Open(dir, &nopRecorder{}, Options{Tune: tc.tune})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Destroy()
			// RocksDB writes its own factories by name, others as {id=NAME;...}.
			var got = regexp.MustCompile(`memtable_factory=(?:\{id=)?([A-Za-z]+)`).FindStringSubmatch(optionsFile(t, dir))
			if got == nil || got[1] != tc.want {
				t.Fatalf("memtable factory %v, want %s", got, tc.want)
			}
		})
	}
}

// FuzzFilteredMemtable runs a program of Puts, Deletes, commits, flushes and
// reopenings on a database with the filtered memtable (with a filter of its
// keys as large as a store's, and with one of a single block, which answers
// "maybe" for nearly every key), checking its rows against a model after
// every commit, and that it updates in place every row the memtable holds
// (a filter that lost a key would have RocksDB add a version instead).
func FuzzFilteredMemtable(f *testing.F) {
	f.Add([]byte{0x00, 0x11, 0x22, 0x06, 0x00, 0x11, 0x06, 0x35, 0x06, 0x07, 0x00, 0x06})
	f.Add([]byte{0x40, 0x41, 0x42, 0x43, 0x06, 0x50, 0x61, 0x72, 0x06, 0x15, 0x06, 0xef, 0x40, 0x06})
	f.Add(bytes.Repeat([]byte{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x06, 0x25, 0x06}, 8))
	var dirs = f.TempDir()
	var runs int
	f.Fuzz(func(t *testing.T, program []byte) {
		for _, filterBytes := range []int{0, 64} {
			runs++
			runFilteredMemtable(t, filepath.Join(dirs, strconv.Itoa(runs)), program, filterBytes)
		}
	})
}

// memtableKeys is how many keys runFilteredMemtable writes.
const memtableKeys = 32

// memtableKey is the k-th key runFilteredMemtable writes: keys of 2 to 33
// bytes, many sharing prefixes.
func memtableKey(k int) string { return fmt.Sprintf("k%x", k) + strings.Repeat("-", k) }

// runFilteredMemtable runs program (see FuzzFilteredMemtable) on a new
// database in dir whose memtable filters are of filterBytes bytes (0: a
// store's).
func runFilteredMemtable(t *testing.T, dir string, program []byte, filterBytes int) {
	defer os.RemoveAll(dir)
	var o = memtableOptions()
	defer o.Destroy()
	var ratio, min = MemtableKeyFilterRatio, minMemtableKeyFilterBytes
	if filterBytes != 0 {
		ratio, min = 0, filterBytes
	}
	if ok, err := filterMemtableOf(o, ratio, min); err != nil || !ok {
		t.Fatalf("filterMemtableOf: %v, %v", ok, err)
	}
	var db, err = grocksdb.OpenDb(o, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { db.Close() }()
	var ro, wo, fo = grocksdb.NewDefaultReadOptions(), grocksdb.NewDefaultWriteOptions(), grocksdb.NewDefaultFlushOptions()
	defer ro.Destroy()
	defer wo.Destroy()
	defer fo.Destroy()
	fo.SetWait(true)
	var wb = grocksdb.NewWriteBatch()
	defer wb.Destroy()

	type record struct {
		key     string
		value   []byte
		deleted bool
	}
	var (
		model    = map[string][]byte{} // The database's rows.
		batch    []record              // Written by the next commit.
		memtable = map[string]record{} // The latest version of each row the memtable holds.
		updated  int                   // Rows due to be updated in place since base.
		base     = keysUpdated(t, o)
	)
	var flush = func(i int) {
		if err := db.Flush(fo); err != nil {
			t.Fatalf("op %d: flush: %v", i, err)
		}
		clear(memtable)
	}
	var checkUpdated = func(i int) {
		if got := keysUpdated(t, o) - base; got != updated {
			t.Fatalf("op %d: %d rows updated in place, want %d", i, got, updated)
		}
	}
	for i, op := range program {
		switch op & 0x0f {
		case 0, 1, 2, 3, 4: // Put a value of 0..15 bytes.
			var r = record{key: memtableKey(int(op>>3^op) % memtableKeys), value: bytes.Repeat([]byte{byte(i)}, int(op>>4))}
			wb.Put([]byte(r.key), r.value)
			batch = append(batch, r)
		case 5: // Delete.
			var r = record{key: memtableKey(int(op>>3^op) % memtableKeys), deleted: true}
			wb.Delete([]byte(r.key))
			batch = append(batch, r)
		case 7: // Flush: a new, empty memtable.
			flush(i)
		case 8: // Reopen, replaying the write-ahead log, then flush.
			checkUpdated(i)
			db.Close()
			if db, err = grocksdb.OpenDb(o, dir); err != nil {
				t.Fatalf("op %d: reopen: %v", i, err)
			}
			flush(i)
			base, updated = keysUpdated(t, o), 0
			checkRows(t, i, db, ro, model)
		default: // Commit.
			if err := db.Write(wo, wb); err != nil {
				t.Fatalf("op %d: write: %v", i, err)
			}
			// The batch's records in their order, a Put updating in place
			// the latest version the memtable holds, if a Put at least as
			// long, and else adding a version, as a Delete does.
			for _, r := range batch {
				if prev, held := memtable[r.key]; held && !r.deleted && !prev.deleted && len(r.value) <= len(prev.value) {
					updated++
				}
				memtable[r.key] = r
				if r.deleted {
					delete(model, r.key)
				} else {
					model[r.key] = r.value
				}
			}
			wb.Clear()
			batch = batch[:0]
			checkRows(t, i, db, ro, model)
		}
	}
	checkUpdated(len(program))
}

// checkRows checks db's rows against model's, by Get and by a scan.
func checkRows(t *testing.T, op int, db *grocksdb.DB, ro *grocksdb.ReadOptions, model map[string][]byte) {
	t.Helper()
	for k := range memtableKeys {
		var key = memtableKey(k)
		var v, err = db.Get(ro, []byte(key))
		if err != nil {
			t.Fatalf("op %d: get %s: %v", op, key, err)
		}
		var got, present = bytes.Clone(v.Data()), v.Exists()
		v.Free()
		var want, in = model[key]
		if present != in || !bytes.Equal(got, want) {
			t.Fatalf("op %d: get %s = %q (present %v), want %q (present %v)", op, key, got, present, want, in)
		}
	}
	var it = db.NewIterator(ro)
	defer it.Close()
	var n int
	for it.SeekToFirst(); it.Valid(); it.Next() {
		var k, v = it.Key(), it.Value()
		var want, in = model[string(k.Data())]
		if !in || !bytes.Equal(v.Data(), want) {
			t.Fatalf("op %d: scan has %q=%q, want %q (present %v)", op, k.Data(), v.Data(), want, in)
		}
		k.Free()
		v.Free()
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatalf("op %d: scan: %v", op, err)
	}
	if n != len(model) {
		t.Fatalf("op %d: scan has %d rows, want %d", op, n, len(model))
	}
}
