package rocks

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/store/rocks/membudget"
	"github.com/linxGnu/grocksdb"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

func newTestBudget(t *testing.T, cfg membudget.Config) *Budget {
	t.Helper()
	var b, err = NewBudget(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// openNop opens a store in a new directory, recording nothing.
func openNop(t *testing.T, o Options) *Store {
	t.Helper()
	var s, err = Open(t.TempDir(), &nopRecorder{}, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// putRows writes n rows of size bytes to s, keyed by prefix, committing
// every batch rows, and calls after (if set) after each commit.
func putRows(t *testing.T, s *Store, prefix string, n, size, batch int, after func()) {
	t.Helper()
	var value = make([]byte, size)
	var rng = rand.NewChaCha8([32]byte{})
	for i := range n {
		_, _ = rng.Read(value) // Incompressible, as SSTs are compressed.
		if err := s.Put(fmt.Appendf(nil, "%s/%08d", prefix, i), value); err != nil {
			t.Fatal(err)
		}
		if i%batch == batch-1 || i == n-1 {
			await(t, s.StartCommit(nil, checkpointAt(int64(i)), nil))
			if after != nil {
				after()
			}
		}
	}
}

func intProperty(t *testing.T, s *Store, name string) uint64 {
	t.Helper()
	var v, ok = s.DB().GetIntProperty(name)
	if !ok {
		t.Fatalf("no property %s", name)
	}
	return v
}

// Two stores of a budget share one block cache: blocks that one store
// reads are in the cache that the other's RocksDB reports, and in the
// budget's usage; a store given a cache of its own does not see them. Their
// row caches split the budget's, and a store that closes leaves its share
// to the others.
func TestStoresShareTheBudgetsCache(t *testing.T) {
	var cfg = membudget.Config{Bytes: 64 << 20, WriteBufferShare: 0.25, RowCacheShare: 0.25, Shards: 2}
	var b = newTestBudget(t, cfg)
	var a, c = openNop(t, Options{Budget: b}), openNop(t, Options{Budget: b})
	defer a.Destroy()
	var own = openNop(t, Options{Budget: b, BlockCacheBytes: 8 << 20}) // Its own block cache.

	if u := b.Usage(); u.Stores != 3 {
		t.Fatalf("the budget has %d stores, want 3", u.Stores)
	}
	var rowHalf = cfg.RowCacheBytes() / 3 / 2
	a.rows.generationFor(0) // Where a cache takes its share.
	c.rows.generationFor(0)
	if a.rows.half != int(rowHalf) || c.rows.half != int(rowHalf) {
		t.Fatalf("row caches of %d and %d bytes a generation, want %d (a third of the budget's each)", a.rows.half, c.rows.half, rowHalf)
	}

	putRows(t, a, "a", 20000, 100, 1000, nil)
	if u := b.Usage(); u.WriteBuffers == 0 || u.RowCaches == 0 {
		t.Fatalf("after writes, the budget accounts %+v: no memtables or row caches", u)
	}
	if err := a.DB().Flush(flushOpts()); err != nil {
		t.Fatal(err)
	}
	// The write buffer manager charges memtables to the cache, and releases
	// the charge of those flushed in the background: wait until the cache's
	// usage holds still, so that the reads below are all that changes it.
	for last, still, deadline := b.Usage().BlockCache, 0, time.Now().Add(10*time.Second); still < 5 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if u := b.Usage().BlockCache; u == last {
			still++
		} else {
			last, still = u, 0
		}
	}
	var before, cBefore, ownBefore = b.Usage().BlockCache, intProperty(t, c, "rocksdb.block-cache-usage"), intProperty(t, own, "rocksdb.block-cache-usage")
	if before != cBefore {
		t.Fatalf("store c reports a block cache of %d bytes, the budget %d: not the same cache", cBefore, before)
	}
	// Read every row from the database (past the row cache), loading its
	// blocks into the cache.
	var r = (*database)(a).Shared()
	for i := range 20000 {
		if _, ok, err := r.Get(fmt.Appendf(nil, "a/%08d", i)); err != nil || !ok {
			t.Fatalf("Get: %v %v", ok, err)
		}
	}
	var after, cAfter, ownAfter = b.Usage().BlockCache, intProperty(t, c, "rocksdb.block-cache-usage"), intProperty(t, own, "rocksdb.block-cache-usage")
	t.Logf("block cache: budget %d → %d bytes; as store c sees it %d → %d; a store's own %d → %d", before, after, cBefore, cAfter, ownBefore, ownAfter)
	if after < before+1<<20 {
		t.Errorf("reading 2 MB of rows grew the budget's block cache by %d bytes only", after-before)
	}
	if cAfter != after {
		t.Errorf("store c, which read nothing, reports a block cache of %d bytes, not the budget's %d", cAfter, after)
	}
	if ownAfter != ownBefore {
		t.Errorf("the block cache of a store of its own grew from %d to %d bytes", ownBefore, ownAfter)
	}

	// A store that closes leaves its share of the row caches to the others.
	c.Destroy()
	own.Destroy()
	if u := b.Usage(); u.Stores != 1 {
		t.Fatalf("the budget has %d stores, want 1", u.Stores)
	}
	putRows(t, a, "b", 10, 10, 10, nil) // A's cache takes its share at its next generation.
	a.rows.generationFor(0)
	if want := int(cfg.RowCacheBytes() / 2); a.rows.half != want {
		t.Errorf("the last store's row cache has %d bytes a generation, want %d (the whole budget's)", a.rows.half, want)
	}

	// The budget's metrics report the same.
	var reg = prometheus.NewPedanticRegistry()
	reg.MustRegister(b)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 10 {
		t.Fatalf("gathered %d metrics (%v), want 10", n, err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(fmt.Sprintf(`
# HELP gazconsumer_rocksdb_block_cache_capacity_bytes Capacity of the RocksDB block cache that the member's stores share (memtables are charged to it).
# TYPE gazconsumer_rocksdb_block_cache_capacity_bytes gauge
gazconsumer_rocksdb_block_cache_capacity_bytes %d
# HELP gazconsumer_rocksdb_budget_stores Stores open with the member's memory budget.
# TYPE gazconsumer_rocksdb_budget_stores gauge
gazconsumer_rocksdb_budget_stores 1
# HELP gazconsumer_rocksdb_memtable_bytes Size of each store's memtable (RocksDB's write_buffer_size): the memtables' budget over the stores open, up to --rocksdb.shards of them.
# TYPE gazconsumer_rocksdb_memtable_bytes gauge
gazconsumer_rocksdb_memtable_bytes %d
`, cfg.BlockCacheBytes(), cfg.MemtableBytesOf(1))), "gazconsumer_rocksdb_block_cache_capacity_bytes", "gazconsumer_rocksdb_budget_stores", "gazconsumer_rocksdb_memtable_bytes"); err != nil {
		t.Error(err)
	}
}

// The budget's WriteBufferManager makes RocksDB flush memtables before
// they outgrow it: 16 stores of a budget sized for 4 (so that each store's
// memtable is a quarter of the write buffers' budget, and the 16 together
// could hold four times it) hold, together, about the write buffers'
// budget; the same stores with memtables of the same size but no budget
// hold four times more. (The manager does not stall writes: memtables
// written faster than they flush may outgrow it for a while, each store's
// bounded by RocksDB's max_write_buffer_number, and charged to the block
// cache, which evicts blocks meanwhile.)
func TestWriteBufferBudgetFlushes(t *testing.T) {
	const stores, rows, size = 16, 2000, 1000 // 2 MB a store.

	var cfg = membudget.Config{Bytes: 32 << 20, WriteBufferShare: 0.125, RowCacheShare: 0, Shards: 4} // 4 MiB of memtables, 1 MiB each.

	var run = func(o Options) (peak, peakActive, peakManaged, sst uint64) {
		var ss []*Store
		for range stores {
			ss = append(ss, openNop(t, o))
		}
		defer func() {
			for _, s := range ss {
				s.Destroy()
			}
		}()
		var sample = func() {
			var all, active uint64
			for _, s := range ss {
				all += intProperty(t, s, "rocksdb.cur-size-all-mem-tables")
				active += intProperty(t, s, "rocksdb.cur-size-active-mem-table")
			}
			peak, peakActive = max(peak, all), max(peakActive, active)
			if o.Budget != nil {
				peakManaged = max(peakManaged, o.Budget.Usage().WriteBuffers)
			}
		}
		// Round-robin commits of 100 rows to each store, the flushes they
		// caused done after each round (as when writes wait on the
		// recovery log, not on a recorder of nothing).
		for i := 0; i < rows; i += 100 {
			for j, s := range ss {
				putRows(t, s, fmt.Sprintf("s%d/%08d", j, i), 100, size, 100, sample)
			}
			for _, s := range ss {
				for intProperty(t, s, "rocksdb.mem-table-flush-pending") != 0 || intProperty(t, s, "rocksdb.num-running-flushes") != 0 {
					time.Sleep(time.Millisecond)
				}
			}
		}
		for _, s := range ss {
			sst += intProperty(t, s, "rocksdb.total-sst-files-size")
		}
		return peak, peakActive, peakManaged, sst
	}

	var b = newTestBudget(t, cfg)
	var peak, active, managed, sst = run(Options{Budget: b})
	var unbounded, unboundedActive, _, unboundedSST = run(Options{Tune: func(o *grocksdb.Options) {
		o.SetWriteBufferSize(uint64(cfg.MemtableBytes()))
	}})
	t.Logf("memtables of %d stores writing %d MB, with a budget of %d bytes: at most %d bytes (%d active; %d as the budget counts), %d bytes flushed; "+
		"without: at most %d bytes (%d active), %d bytes flushed",
		stores, stores*rows*size>>20, cfg.WriteBufferBytes(), peak, active, managed, sst, unbounded, unboundedActive, unboundedSST)

	// The mutable memtables stay within the budget (RocksDB switches them
	// past 7/8 of it); those switched are counted until flushed: allow for
	// a round of writes of them beside.
	if budget := uint64(cfg.WriteBufferBytes()); active > budget {
		t.Errorf("the active memtables held up to %d bytes, beyond their budget (%d)", active, budget)
	}
	// RocksDB counts in a memtable's size its filter and index of keys
	// (memtable.cc), which lie outside the budget: allow for them beside.
	if bound := uint64(cfg.WriteBufferBytes() * 3 / 2); managed > bound {
		t.Errorf("the memtables held up to %d bytes as the budget counts, beyond 1.5 times their budget (%d)", managed, bound)
	} else if bound = uint64(float64(bound) * (1 + MemtableKeyFilterRatio + MemtableKeyIndexRatio)); peak > bound {
		t.Errorf("the memtables held up to %d bytes, beyond 1.5 times their budget and their filters and indexes (%d)", peak, bound)
	}
	if sst < stores*rows*size/2 {
		t.Errorf("%d bytes of memtables were flushed, of %d written", sst, stores*rows*size)
	}
	if unbounded < 3*uint64(cfg.WriteBufferBytes()) {
		t.Errorf("without a budget, the memtables held up to %d bytes only: the test does not test the budget", unbounded)
	}
	if u := b.Usage(); u.WriteBuffers != 0 || u.Stores != 0 {
		t.Errorf("with its stores closed, the budget accounts %+v", u)
	}
}

// An Opener without a Budget opens its stores with MemberBudget, the
// budget of membudget.Member; the member's Config can no longer change.
func TestOpenerUsesMemberBudget(t *testing.T) {
	var mb, err = MemberBudget()
	if err != nil {
		t.Fatal(err)
	}
	if mb.Config() != membudget.Member() {
		t.Fatalf("the member's budget is %+v, its Config %+v", mb.Config(), membudget.Member())
	}
	var other = membudget.Default()
	other.Bytes *= 2
	if err := membudget.SetMember(other); err == nil {
		t.Fatal("the member's Config changed while its budget is in use")
	}

	var spec = &pc.ShardSpec{Id: "budget/shard", LabelSet: pb.MustLabelSet(LabelRowCacheBytes, "-1")}
	var before = mb.Usage().Stores
	st, err := Opener{}.OpenStore(testShard{spec: spec}, dirRecorder{&nopRecorder{}, t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var s = st.(*Store)
	defer s.Destroy()
	if s.budget != mb || s.rows != nil || mb.Usage().Stores != before+1 {
		t.Errorf("the store has budget %p (the member's is %p) and row cache %v (its label disables it); the member's budget has %d stores", s.budget, mb, s.rows, mb.Usage().Stores)
	}
}

// memtableOf is the write_buffer_size of s's latest OPTIONS file: what
// RocksDB took.
func memtableOf(t *testing.T, s *Store) int64 {
	t.Helper()
	var names, err = filepath.Glob(filepath.Join(s.dir, "OPTIONS-*"))
	if err != nil || len(names) == 0 {
		t.Fatalf("no OPTIONS file in %s: %v", s.dir, err)
	}
	var latest string
	var latestNum = -1
	for _, name := range names {
		if n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(name), "OPTIONS-")); err == nil && n > latestNum {
			latest, latestNum = name, n
		}
	}
	content, err := os.ReadFile(latest)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(content)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "write_buffer_size="); ok {
			var n, err = strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s: write_buffer_size=%q", latest, v)
			}
			return n
		}
	}
	t.Fatalf("%s sets no write_buffer_size", latest)
	return 0
}

// Each store's memtable is the write buffers' budget over the stores open
// (up to Shards of them): a store opens with the memtable of Shards stores,
// takes its share at its first commit, and a new one at its next commit
// after others open or close; a store whose Options tune the size keeps
// its own. RocksDB flushes by the new size.
func TestMemtablesFollowTheOpenStores(t *testing.T) {
	const mib = 1 << 20
	var cfg = membudget.Config{Bytes: 64 * mib, WriteBufferShare: 0.25, RowCacheShare: 0, Shards: 8} // 16 MiB of memtables.
	var b = newTestBudget(t, cfg)
	var commit = func(s *Store) { putRows(t, s, "c", 1, 10, 1, nil) }
	var want = func(s *Store, size int64) {
		t.Helper()
		if got := memtableOf(t, s); got != size {
			t.Fatalf("%s: a memtable of %d bytes, want %d", s.dir, got, size)
		}
	}
	// flushes reports whether writing 4 MiB to a new memtable of s
	// flushes it: whether the memtable then holds fewer rows than written.
	var flushes = func(s *Store, prefix string) bool {
		t.Helper()
		if err := s.DB().Flush(flushOpts()); err != nil {
			t.Fatal(err)
		}
		const rows = 4 * 1024
		putRows(t, s, prefix, rows, 1024, 256, nil)
		return intProperty(t, s, "rocksdb.num-entries-active-mem-table") < rows
	}

	var a = openNop(t, Options{Budget: b})
	defer a.Destroy()
	want(a, 2*mib)
	commit(a)
	want(a, 16*mib)

	var c = openNop(t, Options{Budget: b})
	defer c.Destroy()
	want(c, 2*mib)
	want(a, 16*mib) // Until its next commit.
	commit(a)
	commit(c)
	want(a, 8*mib)
	want(c, 8*mib)
	if flushes(a, "a8") {
		t.Errorf("4 MiB written to a memtable of 8 MiB flushed it")
	}

	var tuned = openNop(t, Options{Budget: b, Tune: func(o *grocksdb.Options) { o.SetWriteBufferSize(3 * mib) }})
	var more []*Store
	for range 3 {
		more = append(more, openNop(t, Options{Budget: b}))
	}
	// Six stores: a sixth each.
	for _, s := range []*Store{a, c, tuned, more[2]} {
		commit(s)
	}
	want(a, 16*mib/6)
	want(c, 16*mib/6)
	want(more[2], 16*mib/6)
	want(tuned, 3*mib)
	if !flushes(a, "a6") {
		t.Errorf("4 MiB written to a memtable of %d bytes didn't flush it", 16*mib/6)
	}

	for _, s := range more {
		s.Destroy()
	}
	tuned.Destroy()
	commit(a)
	want(a, 8*mib)
	if flushes(a, "a2") {
		t.Errorf("4 MiB written to a memtable of 8 MiB flushed it")
	}
	if u := b.Usage(); u.Stores != 2 {
		t.Fatalf("the budget has %d stores, want 2", u.Stores)
	}
}

func TestWriteAheadLogIsBoundedByTheMemtable(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name  string
		o     Options
		bound int64
	}{
		{"tuned", Options{Tune: func(o *grocksdb.Options) { o.SetWriteBufferSize(mib) }}, mib},
		// Four stores of a budget of 16 MiB of memtables: 4 MiB each.
		{"budget", Options{Budget: newTestBudget(t, membudget.Config{Bytes: 64 * mib, WriteBufferShare: 0.25, Shards: 4})}, 4 * mib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s = openNop(t, tc.o)
			defer s.Destroy()
			if tc.o.Budget != nil {
				for range 3 {
					defer openNop(t, tc.o).Destroy()
				}
			}
			// The same 256 rows of 1 KiB, rewritten in place: a memtable of
			// 256 KiB, and a log growing by each commit's 256 KiB.
			var most int64
			for range 40 * tc.bound / mib {
				putRows(t, s, "k", 256, 1024, 256, nil)
				s.tasks.Wait() // For the flush it began, if it did.
				if n := walBytesIn(s.dir); n > most {
					most = n
				}
			}
			// A commit past the bound flushes: the log holds no more than
			// the bound and the next commit.
			if most > tc.bound+512<<10 {
				t.Fatalf("write-ahead log of %d bytes, want at most %d and a commit", most, tc.bound)
			}
			if tables, _ := filepath.Glob(filepath.Join(s.dir, "*.sst")); len(tables) == 0 {
				t.Fatal("no table file: the memtable never flushed")
			}
			var got, found, err = s.Get([]byte("k/00000007"))
			if err != nil || !found || len(got) != 1024 {
				t.Fatalf("row k/00000007: %d bytes, found %v (%v), want 1024", len(got), found, err)
			}
		})
	}
}
