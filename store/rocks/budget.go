package rocks

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gazconsumer/gazconsumer/store/rocks/membudget"
	"github.com/linxGnu/grocksdb"
	"github.com/prometheus/client_golang/prometheus"
)

// Budget is the memory that the stores of a member share, as its
// membudget.Config sizes it: one LRU block cache, to which a
// WriteBufferManager charges the memtables of every store (so that
// RocksDB flushes the largest memtables when they reach the write
// buffers' budget, and the block cache holds fewer blocks meanwhile), and
// the row caches' budget, split evenly among the open stores. Each store's
// memtable is the memtables' budget split among the open stores, up to the
// Config's Shards of them (membudget.Config.MemtableBytesOf): a store
// opens with the memtable of Shards stores and takes its share at its
// first commit, then a new share at its next commit after another store
// opens or closes. Index and
// filter blocks are cached in the block cache too (pinned for level-0
// files), so that they do not grow beside it with the data.
//
// A store opened with Options.Budget set uses it, unless its Options give
// it caches of its own (BlockCacheBytes or RowCacheBytes, as the labels of
// its shard may: those are outside the budget). A Budget is a
// prometheus.Collector of its usage.
type Budget struct {
	cfg   membudget.Config
	cache *grocksdb.Cache
	wbm   unsafe.Pointer // Of gc_wbm_new.
	rows  *rowShare

	// memtable is the size of each store's memtable: of cfg, for the
	// stores open.
	memtable atomic.Int64

	mu     sync.Mutex
	stores int
	closed bool
}

// NewBudget returns a Budget sized by cfg.
func NewBudget(cfg membudget.Config) (*Budget, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("rocksdb memory budget: %w", err)
	}
	var b = &Budget{
		cfg:   cfg,
		cache: grocksdb.NewLRUCache(uint64(cfg.BlockCacheBytes())),
		rows:  &rowShare{total: cfg.RowCacheBytes()},
	}
	b.memtable.Store(cfg.MemtableBytesOf(0))
	var cc, err = cPointer(b.cache)
	if err != nil {
		b.cache.Destroy()
		return nil, fmt.Errorf("rocksdb memory budget: %w", err)
	}
	var cerr *C.char
	if b.wbm = C.gc_wbm_new(cc, C.size_t(cfg.WriteBufferBytes()), &cerr); b.wbm == nil {
		b.cache.Destroy()
		return nil, fmt.Errorf("rocksdb memory budget: creating its write buffer manager: %w", cError(cerr))
	}
	return b, nil
}

// Config returns the Config of b.
func (b *Budget) Config() membudget.Config { return b.cfg }

// Close releases b's handles of its caches: stores still open keep them
// until they close. Stores may no longer be opened with b, and b collects
// no more metrics.
func (b *Budget) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	C.gc_wbm_destroy(b.wbm)
	b.wbm = nil
	b.cache.Destroy()
}

// BudgetUsage is the memory that the stores of a Budget use.
type BudgetUsage struct {
	// BlockCache is the usage of the block cache, memtables' charges
	// included; BlockCachePinned, of its entries in use (not evictable).
	BlockCache, BlockCachePinned uint64
	// WriteBuffers is the memory of the memtables (mutable, and immutable
	// ones not yet flushed); WriteBuffersMutable, of the mutable ones.
	WriteBuffers, WriteBuffersMutable uint64
	// RowCaches is the memory the row caches account, as of their stores'
	// last commits.
	RowCaches int64
	// Stores is the number of stores open with the budget.
	Stores int
}

// Usage returns what b's stores use; zero once b is closed.
func (b *Budget) Usage() BudgetUsage {
	var u, _ = b.usage()
	return u
}

// usage returns what b's stores use, and false if b is closed.
func (b *Budget) usage() (BudgetUsage, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return BudgetUsage{}, false
	}
	var mutable C.size_t
	var all = C.gc_wbm_usage(b.wbm, &mutable)
	return BudgetUsage{
		BlockCache:          b.cache.GetUsage(),
		BlockCachePinned:    b.cache.GetPinnedUsage(),
		WriteBuffers:        uint64(all),
		WriteBuffersMutable: uint64(mutable),
		RowCaches:           b.rows.used.Load(),
		Stores:              b.stores,
	}, true
}

// attach makes the store of bbto and opts use b, with a memtable of the
// size it returns (which the store's commits then change to b's memtable):
// they were made for it (see Open), and are not yet used.
func (b *Budget) attach(bbto *grocksdb.BlockBasedTableOptions, opts *grocksdb.Options, sharedBlockCache bool) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errors.New("its memory budget is closed")
	}
	var copts, err = cPointer(opts)
	if err != nil {
		return 0, err
	}
	if sharedBlockCache {
		bbto.SetBlockCache(b.cache)
	}
	C.gc_options_set_wbm(copts, b.wbm)
	b.stores++
	b.memtable.Store(b.cfg.MemtableBytesOf(b.stores))
	// A store opens with the smallest memtable it may have, and takes its
	// share at its first commit. RocksDB sizes a memtable's arena blocks
	// and Bloom filter (and the store its filter and index of keys) by its
	// first size and keeps them while it lives: a memtable which grows keeps
	// its own until it flushes (the next is larger), one which shrinks
	// keeps a larger filter than its share.
	var opening = b.cfg.MemtableBytes()
	opts.SetWriteBufferSize(uint64(opening))
	return opening, nil
}

// detach notes that a store attached to b closed.
func (b *Budget) detach() {
	b.mu.Lock()
	b.stores--
	b.memtable.Store(b.cfg.MemtableBytesOf(b.stores))
	b.mu.Unlock()
}

// memberBudget is the Budget of MemberBudget.
var memberBudget struct {
	once sync.Once
	b    *Budget
	err  error
}

// MemberBudget returns the Budget of the process's member, built (and
// registered with Prometheus' default registerer) on the first call from
// membudget.Member, the Config that runconsumer sets from the member's
// flags (--rocksdb.memory-budget, ...): an Opener whose Options have no
// Budget opens its stores with it.
func MemberBudget() (*Budget, error) {
	memberBudget.once.Do(func() {
		var b, err = NewBudget(membudget.Member())
		if err == nil {
			if err = prometheus.Register(b); err != nil {
				b.Close()
				err = fmt.Errorf("registering the metrics of the member's memory budget: %w", err)
			}
		}
		memberBudget.b, memberBudget.err = b, err
	})
	return memberBudget.b, memberBudget.err
}

// Metrics of a Budget.
var (
	blockCacheCapacityDesc = prometheus.NewDesc("gazconsumer_rocksdb_block_cache_capacity_bytes",
		"Capacity of the RocksDB block cache that the member's stores share (memtables are charged to it).", nil, nil)
	blockCacheUsageDesc = prometheus.NewDesc("gazconsumer_rocksdb_block_cache_usage_bytes",
		"Usage of the RocksDB block cache that the member's stores share, memtables' charges included.", nil, nil)
	blockCachePinnedDesc = prometheus.NewDesc("gazconsumer_rocksdb_block_cache_pinned_usage_bytes",
		"Usage of the shared RocksDB block cache by entries in use, which it cannot evict.", nil, nil)
	writeBufferCapacityDesc = prometheus.NewDesc("gazconsumer_rocksdb_write_buffer_capacity_bytes",
		"Budget of the memtables of the member's stores, past which RocksDB flushes them.", nil, nil)
	writeBufferUsageDesc = prometheus.NewDesc("gazconsumer_rocksdb_write_buffer_usage_bytes",
		"Memory of the memtables of the member's stores, by state (all: mutable and immutable not yet flushed; mutable).", []string{"state"}, nil)
	rowCacheCapacityDesc = prometheus.NewDesc("gazconsumer_rocksdb_row_cache_capacity_bytes",
		"Budget of the row caches of the member's stores, split evenly among them.", nil, nil)
	rowCacheUsageDesc = prometheus.NewDesc("gazconsumer_rocksdb_row_cache_usage_bytes",
		"Memory the row caches of the member's stores account, as of their last commits.", nil, nil)
	budgetStoresDesc = prometheus.NewDesc("gazconsumer_rocksdb_budget_stores",
		"Stores open with the member's memory budget.", nil, nil)
	memtableDesc = prometheus.NewDesc("gazconsumer_rocksdb_memtable_bytes",
		"Size of each store's memtable (RocksDB's write_buffer_size): the memtables' budget over the stores open, up to --rocksdb.shards of them.", nil, nil)
)

// Describe implements prometheus.Collector.
func (b *Budget) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{blockCacheCapacityDesc, blockCacheUsageDesc, blockCachePinnedDesc,
		writeBufferCapacityDesc, writeBufferUsageDesc, rowCacheCapacityDesc, rowCacheUsageDesc, budgetStoresDesc, memtableDesc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (b *Budget) Collect(ch chan<- prometheus.Metric) {
	var u, ok = b.usage()
	if !ok {
		return
	}
	var gauge = func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(blockCacheCapacityDesc, float64(b.cfg.BlockCacheBytes()))
	gauge(blockCacheUsageDesc, float64(u.BlockCache))
	gauge(blockCachePinnedDesc, float64(u.BlockCachePinned))
	gauge(writeBufferCapacityDesc, float64(b.cfg.WriteBufferBytes()))
	gauge(writeBufferUsageDesc, float64(u.WriteBuffers), "all")
	gauge(writeBufferUsageDesc, float64(u.WriteBuffersMutable), "mutable")
	gauge(rowCacheCapacityDesc, float64(b.cfg.RowCacheBytes()))
	gauge(rowCacheUsageDesc, float64(u.RowCaches))
	gauge(budgetStoresDesc, float64(u.Stores))
	gauge(memtableDesc, float64(b.memtable.Load()))
}

var _ prometheus.Collector = (*Budget)(nil)
