package rocks

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
	for _, tc := range []struct {
		name  string
		tune  func(*grocksdb.Options)
		want  string
		bloom string // RocksDB's own filter of the memtable's keys, which the store's replaces.
	}{
		{"defaults", nil, "GazconsumerFilteredSkipListFactory", "0.000000"},
		// The filter serves in-place updates (and reads beside them), and
		// only RocksDB's skip list: others keep RocksDB's filter.
		{"no in-place updates", func(o *grocksdb.Options) { o.SetInplaceUpdateSupport(false) }, "SkipListFactory", "0.020000"},
		{"another memtable", func(o *grocksdb.Options) { o.SetMemtableVectorRep() }, "VectorRepFactory", "0.020000"},
		// Keys equal by a comparator of their own may differ in bytes, which
		// the filter hashes.
		{"another comparator", func(o *grocksdb.Options) {
			o.SetComparator(grocksdb.NewComparator("gazconsumer.test.folded", func(a, b []byte) int {
				return bytes.Compare(bytes.ToLower(a), bytes.ToLower(b))
			}))
		}, "SkipListFactory", "0.020000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var dir = t.TempDir()
			var s, err = Open(dir, &nopRecorder{}, Options{Tune: tc.tune})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Destroy()
			// RocksDB writes its own factories by name, others as {id=NAME;...}.
			var got = regexp.MustCompile(`^(?:\{id=)?([A-Za-z]+)`).FindStringSubmatch(optionValue(t, dir, "memtable_factory"))
			if got == nil || got[1] != tc.want {
				t.Fatalf("memtable factory %v, want %s", got, tc.want)
			}
			if got := optionValue(t, dir, "memtable_prefix_bloom_size_ratio"); got != tc.bloom {
				t.Fatalf("RocksDB's memtable filter has ratio %s, want %s", got, tc.bloom)
			}
		})
	}
}

// memtableFilters are the filters and indexes of keys FuzzFilteredMemtable
// runs its programs with: a store's; a filter of a single block, which
// answers "maybe" for nearly every key; no index, so that every key the
// filter may hold is searched for; and an index of 16 slots, which fills
// with 12 of the 32 keys, then searches for the others.
var memtableFilters = []memtableFilter{
	{0, MemtableKeyIndexRatio},
	{64, MemtableKeyIndexRatio},
	{0, 0},
	{64, 128.0 / (64 << 20)},
}

// memtableFilter is a filter and an index of keys of memtables.
type memtableFilter struct {
	filterBytes int     // 0: a store's.
	indexRatio  float64 // Of the memtable's size (memtableOptions: 64 MiB).
}

// set makes o's memtables keep mf's filter and index.
func (mf memtableFilter) set(t testing.TB, o *grocksdb.Options) {
	t.Helper()
	var ratio, min = MemtableKeyFilterRatio, minMemtableKeyFilterBytes
	if mf.filterBytes != 0 {
		ratio, min = 0, mf.filterBytes
	}
	if ok, err := filterMemtableOf(o, ratio, min, mf.indexRatio); err != nil || !ok {
		t.Fatalf("filterMemtableOf: %v, %v", ok, err)
	}
}

// FuzzFilteredMemtable runs a program of Puts, Deletes, commits, flushes and
// reopenings on a database with the filtered memtable (each of
// memtableFilters), checking its rows against a model after every commit,
// and that it updates in place every row the memtable holds (a filter that
// lost a key would have RocksDB add a version instead), and no other (an
// index that found a version other than the key's latest would have RocksDB
// update a row shadowed, or deleted, in place).
func FuzzFilteredMemtable(f *testing.F) {
	f.Add([]byte{0x00, 0x11, 0x22, 0x06, 0x00, 0x11, 0x06, 0x35, 0x06, 0x07, 0x00, 0x06})
	f.Add([]byte{0x40, 0x41, 0x42, 0x43, 0x06, 0x50, 0x61, 0x72, 0x06, 0x15, 0x06, 0xef, 0x40, 0x06})
	f.Add(bytes.Repeat([]byte{0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x06, 0x25, 0x06}, 8))
	f.Add(bytes.Repeat([]byte{0x00, 0x09, 0x01, 0x02, 0x03, 0x04, 0x06, 0x85, 0x96, 0x06, 0x10, 0x21, 0x06}, 6))
	// A row put, deleted and put shorter; a row put, put longer (a version
	// added) and put shorter: each later Put must find the latest version.
	f.Add([]byte{0x81, 0x06, 0xa5, 0x06, 0x13, 0x06, 0x11, 0x06, 0x83, 0x06, 0x11, 0x06})
	var dirs = f.TempDir()
	var runs int
	f.Fuzz(func(t *testing.T, program []byte) {
		for _, mf := range memtableFilters {
			runs++
			runFilteredMemtable(t, filepath.Join(dirs, strconv.Itoa(runs)), program, mf)
		}
	})
}

// memtableKeys is how many keys runFilteredMemtable writes.
const memtableKeys = 32

// memtableKey is the k-th key runFilteredMemtable writes: keys of 2 to 33
// bytes, many sharing prefixes.
func memtableKey(k int) string { return fmt.Sprintf("k%x", k) + strings.Repeat("-", k) }

// runFilteredMemtable runs program (see FuzzFilteredMemtable) on a new
// database in dir whose memtables keep mf's filter and index.
func runFilteredMemtable(t *testing.T, dir string, program []byte, mf memtableFilter) {
	defer os.RemoveAll(dir)
	var o = memtableOptions()
	defer o.Destroy()
	mf.set(t, o)
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

// BenchmarkMemtableRewrite writes batches of rows, each of a sorted random
// tenth of 125,000 keys (a shard of the bench's `large`), into one memtable
// that holds them all after the first batches, as a store's commits do: with
// the store's filter and index of keys, with its filter and no index (each
// update of a row the memtable holds searches its skip list), and RocksDB's
// plain skip list. It reports the time a row.
func BenchmarkMemtableRewrite(b *testing.B) {
	const keys, batch = 125_000, 12_500
	for _, bc := range []struct {
		name   string
		filter *memtableFilter // Nil: RocksDB's skip list.
	}{
		{"index", &memtableFilter{0, MemtableKeyIndexRatio}},
		{"filter-only", &memtableFilter{0, 0}},
		{"skiplist", nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var o = memtableOptions()
			defer o.Destroy()
			if bc.filter != nil {
				bc.filter.set(b, o)
			}
			var db, err = grocksdb.OpenDb(o, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			var wo = grocksdb.NewDefaultWriteOptions()
			defer wo.Destroy()
			wo.DisableWAL(true)
			var wb = grocksdb.NewWriteBatch()
			defer wb.Destroy()
			var rnd = rand.New(rand.NewPCG(1, 2))
			var picked = make([]int, 0, batch)
			var key, value = make([]byte, 0, 16), make([]byte, 8)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				picked = picked[:0]
				for range batch {
					picked = append(picked, rnd.IntN(keys))
				}
				slices.Sort(picked)
				picked = slices.Compact(picked)
				for _, k := range picked {
					key = fmt.Appendf(key[:0], "key-%08d", k)
					binary.LittleEndian.PutUint64(value, uint64(i))
					wb.Put(key, value)
				}
				if err := db.Write(wo, wb); err != nil {
					b.Fatal(err)
				}
				wb.Clear()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/row")
		})
	}
}

// appendMerge is a merge operator which joins a row's value and operands
// with commas, counting its full merges.
type appendMerge struct{ full *int }

func (m appendMerge) Name() string { return "gazconsumer.test.append" }

func (m appendMerge) FullMerge(_, existing []byte, operands [][]byte) ([]byte, bool) {
	*m.full++
	var out = bytes.Clone(existing)
	for _, op := range operands {
		if len(out) != 0 {
			out = append(out, ',')
		}
		out = append(out, op...)
	}
	return out, true
}

// TestFilteredMemtableCountsSuccessiveMerges checks the one caller which
// steps on from where the index of keys positions an iterator: RocksDB
// counting a key's successive merges in the memtable, which, at
// max_successive_merges of them, merges the next at once (a full merge as
// it's written). A count that stopped at the entry the index found would
// never reach it.
func TestFilteredMemtableCountsSuccessiveMerges(t *testing.T) {
	for _, mf := range memtableFilters {
		var o = memtableOptions()
		var full int
		o.SetMergeOperator(appendMerge{&full})
		o.SetMaxSuccessiveMerges(2)
		mf.set(t, o)
		var db, err = grocksdb.OpenDb(o, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		var wo, ro = grocksdb.NewDefaultWriteOptions(), grocksdb.NewDefaultReadOptions()
		var write = func(merge bool, key, value string) {
			if merge {
				err = db.Merge(wo, []byte(key), []byte(value))
			} else {
				err = db.Put(wo, []byte(key), []byte(value))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		// Other keys about it, so that the skip list holds entries after it.
		for k := range memtableKeys {
			write(false, memtableKey(k), "x")
		}
		var key = memtableKey(7)
		write(false, key, "a")
		write(true, key, "b")
		write(true, key, "c")
		if full != 0 {
			t.Fatalf("%+v: %d full merges after 2 merges, want 0", mf, full)
		}
		write(true, key, "d") // Follows two merges: merged as it's written.
		if full == 0 {
			t.Fatalf("%+v: no full merge after 3 merges, want the third merged as written", mf)
		}
		got, err := db.GetBytes(ro, []byte(key))
		if err != nil || string(got) != "a,b,c,d" {
			t.Fatalf("%+v: %s is %q (%v), want a,b,c,d", mf, key, got, err)
		}
		wo.Destroy()
		ro.Destroy()
		db.Close()
		// Not o.Destroy: grocksdb's frees the merge operator the options'
		// own destruction freed (SIGSEGV). The test leaks the options.
	}
}

// TestFilteredMemtableAnswersGets checks that a Get or MultiGet of keys a
// memtable with the store's filter lacks searches none of its skip list (no
// key comparisons), in place of RocksDB's own filter of its keys, which the
// filtered memtable turns off; and that the plain skip list, without either
// filter, does search (which the measure would otherwise not tell).
func TestFilteredMemtableAnswersGets(t *testing.T) {
	const keys = 2000
	var key = func(k int) []byte { return fmt.Appendf(nil, "key-%06d", k) }
	for _, tc := range []struct {
		name     string
		filtered bool
	}{{"the store's filter", true}, {"no filter", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var o = memtableOptions()
			defer o.Destroy()
			if tc.filtered {
				memtableFilters[0].set(t, o)
			} else {
				o.SetMemTablePrefixBloomSizeRatio(0)
			}
			var dir = t.TempDir()
			var db, err = grocksdb.OpenDb(o, dir)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var wo, ro = grocksdb.NewDefaultWriteOptions(), grocksdb.NewDefaultReadOptions()
			defer wo.Destroy()
			defer ro.Destroy()
			for k := 0; k < keys; k += 2 { // Even keys: odd ones are absent.
				if err = db.Put(wo, key(k), []byte("v")); err != nil {
					t.Fatal(err)
				}
			}
			if got := optionValue(t, dir, "memtable_prefix_bloom_size_ratio"); tc.filtered && got != "0.000000" {
				t.Fatalf("RocksDB's memtable filter has ratio %s, want it off", got)
			}

			// Perf counters are the thread's own.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			grocksdb.SetPerfLevel(grocksdb.KEnableCount)
			defer grocksdb.SetPerfLevel(grocksdb.KDisable)
			var pc = grocksdb.NewPerfContext()
			defer pc.Destroy()
			const userKeyComparisons = 0 // rocksdb_user_key_comparison_count.

			var absent [][]byte
			for k := 1; k < keys; k += 2 {
				absent = append(absent, key(k))
			}
			pc.Reset()
			for _, k := range absent {
				v, err := db.Get(ro, k)
				if err != nil || v.Exists() {
					t.Fatalf("get %s: exists %v, %v", k, v.Exists(), err)
				}
				v.Free()
			}
			vs, err := db.MultiGet(ro, absent...)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vs {
				if v.Exists() {
					t.Fatalf("multiget %s exists", absent[i])
				}
			}
			vs.Destroy()
			var compared = pc.Metric(userKeyComparisons)
			// Of 2,000 lookups, the filter's false positives (about 1% at
			// 10 bits a key) search: some tens of comparisons each.
			if tc.filtered && compared > 2*keys {
				t.Fatalf("%d key comparisons for %d lookups of absent keys, want few", compared, 2*len(absent))
			} else if !tc.filtered && compared < 10*keys {
				t.Fatalf("%d key comparisons for %d lookups of absent keys without a filter, want a search each", compared, 2*len(absent))
			}

			// Keys it holds are found, by Get and MultiGet.
			for k := 0; k < keys; k += 2 {
				got, err := db.GetBytes(ro, key(k))
				if err != nil || string(got) != "v" {
					t.Fatalf("get %s = %q, %v", key(k), got, err)
				}
			}
			vs, err = db.MultiGet(ro, key(0), key(1), key(keys-2))
			if err != nil {
				t.Fatal(err)
			}
			defer vs.Destroy()
			if !vs[0].Exists() || vs[1].Exists() || !vs[2].Exists() {
				t.Fatalf("multiget: exists %v %v %v, want true false true", vs[0].Exists(), vs[1].Exists(), vs[2].Exists())
			}
		})
	}
}

// optionValue is the value of option name in the OPTIONS file RocksDB
// wrote last in dir.
func optionValue(t *testing.T, dir, name string) string {
	t.Helper()
	var files, err = filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no OPTIONS file in %s (%v)", dir, err)
	}
	slices.Sort(files)
	b, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	var m = regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(name) + `=(.*)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no option %s in %s", name, files[len(files)-1])
	}
	return string(m[1])
}

// TestFilteredMemtableGetsBesideWrites reads, on other goroutines, keys
// whose writes returned while the memtable's one writer goes on inserting
// others: each is found, as the filter a read asks first has the bits of
// every key inserted before the read's sequence number.
func TestFilteredMemtableGetsBesideWrites(t *testing.T) {
	const keys, readers = 20_000, 2
	var o = memtableOptions()
	defer o.Destroy()
	memtableFilters[0].set(t, o)
	var db, err = grocksdb.OpenDb(o, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var wo = grocksdb.NewDefaultWriteOptions()
	defer wo.Destroy()
	var key = func(k int) []byte { return fmt.Appendf(nil, "key-%06d-%s", k, strings.Repeat("x", k%300)) }

	var written atomic.Int64 // Keys [0, written) were written.
	// read reads keys written, at random, until all are and it read as many.
	var read = func(r int) error {
		var ro = grocksdb.NewDefaultReadOptions()
		defer ro.Destroy()
		var rng = rand.New(rand.NewPCG(uint64(r), 1))
		var reads int
		for n := written.Load(); n < keys || reads < keys; n = written.Load() {
			if n == 0 {
				continue
			}
			var k = rng.IntN(int(n))
			var v, err = db.Get(ro, key(k))
			if err != nil {
				return err
			} else if !v.Exists() {
				return fmt.Errorf("key %d is absent with %d keys written", k, n)
			}
			v.Free()
			reads++
		}
		return nil
	}
	var group sync.WaitGroup
	var errs = make(chan error, readers)
	for r := range readers {
		group.Go(func() { errs <- read(r) })
	}
	for k := range keys {
		if err := db.Put(wo, key(k), []byte("v")); err != nil {
			t.Fatal(err)
		}
		written.Store(int64(k + 1))
	}
	group.Wait()
	for range readers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
