package rocks

// #include "shim.h"
import "C"

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/linxGnu/grocksdb"
	pb "go.gazette.dev/core/broker/protocol"
)

// Labels of a ShardSpec which tune its store (see OptionsFromLabels).
const (
	// LabelBlockCacheBytes is the size of a block cache of the shard's
	// own, in bytes, outside the member's budget.
	LabelBlockCacheBytes = "gazconsumer.dev/rocks-block-cache-bytes"
	// LabelRowCacheBytes is the size of a row cache of the shard's own, in
	// bytes, outside the member's budget; negative disables it.
	LabelRowCacheBytes = "gazconsumer.dev/rocks-row-cache-bytes"
	// LabelCompression is the compression of SST files: none, snappy, lz4
	// or zstd.
	LabelCompression = "gazconsumer.dev/rocks-compression"
)

// Default sizes of the caches of a store without a Budget.
const (
	DefaultBlockCacheBytes = 64 << 20
	DefaultRowCacheBytes   = 32 << 20
)

// DefaultCompression is the default compression of SST files.
const DefaultCompression = "lz4"

// Options tune a Store. Zero-valued fields take their defaults.
type Options struct {
	// Budget, if set, is the memory the store shares with the other stores
	// of its member (see Budget): its block cache, its memtables' budget,
	// and its row cache, a share of the budget's. The fields below which
	// size caches give the store a cache of its own instead, outside the
	// budget.
	Budget *Budget
	// BlockCacheBytes is the capacity of the store's own LRU block cache;
	// zero means DefaultBlockCacheBytes without a Budget, and the
	// Budget's shared cache with one.
	BlockCacheBytes uint64
	// RowCacheBytes bounds the store's cache of rows as the database holds
	// them (values, and keys known to be absent), which serves a Get of a
	// key read or written recently without a call into RocksDB. Zero means
	// DefaultRowCacheBytes without a Budget, and a share of the Budget's
	// with one; negative disables the cache.
	RowCacheBytes int64
	// Compression of SST files: "none", "snappy", "lz4" or "zstd".
	Compression string
	// LogCompaction is the policy by which the store keeps its recovery
	// log's needed span close to its live state (see
	// recoverylog.Recorder.Compact); zero-valued, it's
	// recoverylog.DefaultCompaction. A negative Ratio disables it.
	LogCompaction recoverylog.Compaction
	// LogCompactionInterval is how often the policy is checked; zero means
	// DefaultLogCompactionInterval.
	LogCompactionInterval time.Duration
	// Tune, if set, further adjusts the RocksDB options before the database
	// opens. The recorded Env, WAL recycling and CreateIfMissing are set
	// after it and may not be changed; so is the memtable's filter of its
	// keys, in place of RocksDB's own, if Tune leaves in-place updates on,
	// RocksDB's skip list memtable and a bytewise comparator (see
	// memtable.cc).
	Tune func(*grocksdb.Options)
}

// DefaultMemtableBloomRatio is the size of the memtable's Bloom filter, as
// a fraction of the memtable's (RocksDB's memtable_prefix_bloom_size_ratio,
// with whole-key filtering): 2% of the default 64 MiB is about 10 bits a
// key for a million keys.
const DefaultMemtableBloomRatio = 0.02

// MemtableKeyFilterRatio is the size of the filter of its keys which each
// memtable keeps for in-place updates and reads (filterMemtable), as a
// fraction of the memtable's: as large as RocksDB's own filter of the
// memtable's keys (DefaultMemtableBloomRatio), which it replaces.
const MemtableKeyFilterRatio = DefaultMemtableBloomRatio

// minMemtableKeyFilterBytes bounds the filter of a small memtable from
// below.
const minMemtableKeyFilterBytes = 4 << 10

// MemtableKeyIndexRatio bounds the index of its keys which each memtable
// keeps for in-place updates (filterMemtable), as a fraction of the
// memtable's size, which counts it: enough for every key of a memtable of
// rows of 64 bytes or more, and for a third of those of rows of a few
// bytes (an update of a key it doesn't hold searches the skip list).
const MemtableKeyIndexRatio = 1.0 / 8

// filterMemtable makes opts' memtables keep a filter of their keys, which
// spares an in-place update of a key a memtable lacks (most rows of a large
// transaction) a search of the memtable's skip list, and a Get of it too (in
// place of RocksDB's own filter of the memtable's keys, which opts then no
// longer keep: each key is hashed once less a write), and an index of their
// keys, which spares that search an update of a key the memtable holds
// (memtable.cc), if opts update memtables in place with RocksDB's own skip
// list and compare keys as bytes (unless Tune changed that): the store's
// defaults.
func filterMemtable(opts *grocksdb.Options) error {
	var _, err = filterMemtableOf(opts, MemtableKeyFilterRatio, minMemtableKeyFilterBytes, MemtableKeyIndexRatio)
	return err
}

// filterMemtableOf is filterMemtable with a filter of ratio times the
// memtable's size, at least minBytes, and an index of at most indexRatio
// times it; it returns whether opts' memtables keep them.
func filterMemtableOf(opts *grocksdb.Options, ratio float64, minBytes int, indexRatio float64) (bool, error) {
	var copts, err = cPointer(opts)
	if err != nil {
		return false, err
	}
	return C.gc_options_set_filtered_memtable(copts, C.double(ratio), C.size_t(minBytes), C.double(indexRatio)) == 1, nil
}

// resizeFilteredMemtable sizes the filters and indexes of the memtables
// which databases opened with opts make from now on (if filterMemtable
// filtered them) for memtables of size bytes.
func resizeFilteredMemtable(opts *grocksdb.Options, size int64) error {
	var copts, err = cPointer(opts)
	if err != nil {
		return err
	}
	C.gc_options_resize_filtered_memtable(copts, C.size_t(size))
	return nil
}

// DefaultLogCompactionInterval is how often a store checks whether its
// recovery log needs compaction.
const DefaultLogCompactionInterval = 30 * time.Second

// Defaults of RocksDB options which keep the recovery log small: RocksDB
// rolls its MANIFEST and info LOG past these sizes, and keeps few old LOGs,
// so that long-lived files don't pin old log content.
const (
	DefaultMaxManifestFileSize = 4 << 20
	DefaultMaxInfoLogFileSize  = 1 << 20
	DefaultKeepInfoLogFiles    = 2
)

func (o Options) rowCacheBytes() int64 {
	if o.RowCacheBytes == 0 {
		return DefaultRowCacheBytes
	}
	return o.RowCacheBytes
}

func (o Options) logCompaction() (recoverylog.Compaction, time.Duration) {
	var c, every = o.LogCompaction, o.LogCompactionInterval
	if c == (recoverylog.Compaction{}) {
		c = recoverylog.DefaultCompaction
	}
	if every == 0 {
		every = DefaultLogCompactionInterval
	}
	return c, every
}

// OptionsFromLabels returns Options set from a shard's labels.
func OptionsFromLabels(labels pb.LabelSet) (Options, error) {
	var o Options
	if v := labels.ValueOf(LabelBlockCacheBytes); v != "" {
		var n, err = strconv.ParseUint(v, 10, 64)
		if err != nil {
			return o, fmt.Errorf("label %s: %w", LabelBlockCacheBytes, err)
		}
		o.BlockCacheBytes = n
	}
	if v := labels.ValueOf(LabelRowCacheBytes); v != "" {
		var n, err = strconv.ParseInt(v, 10, 64)
		if err != nil {
			return o, fmt.Errorf("label %s: %w", LabelRowCacheBytes, err)
		}
		o.RowCacheBytes = n
	}
	o.Compression = labels.ValueOf(LabelCompression)
	if _, err := o.compression(); err != nil {
		return o, err
	}
	return o, nil
}

func (o Options) compression() (grocksdb.CompressionType, error) {
	switch o.Compression {
	case "":
		return grocksdb.LZ4Compression, nil
	case "none":
		return grocksdb.NoCompression, nil
	case "snappy":
		return grocksdb.SnappyCompression, nil
	case "lz4":
		return grocksdb.LZ4Compression, nil
	case "zstd":
		return grocksdb.ZSTDCompression, nil
	}
	return 0, fmt.Errorf("unknown compression %q (want none, snappy, lz4 or zstd)", o.Compression)
}

// Opener opens shards' stores: it implements runtime.StoreOpener.
type Opener struct {
	// Options of every store, overridden by the labels of each shard's
	// spec (see OptionsFromLabels). If their Budget is nil, the stores
	// share MemberBudget, the budget of the member's flags.
	Options Options
}

// OpenStore opens the store of shard in rec's directory. Rec must also be a
// FileRecorder, as *recoverylog.Recorder is.
func (o Opener) OpenStore(shard runtime.Shard, rec runtime.Recorder) (runtime.Store, error) {
	var spec = shard.Spec()
	var fr, ok = rec.(FileRecorder)
	if !ok {
		return nil, fmt.Errorf("shard %s: recorder %T does not record file operations", spec.Id, rec)
	}
	var labeled, err = OptionsFromLabels(spec.LabelSet)
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", spec.Id, err)
	}
	var opts = o.Options
	if opts.Budget == nil {
		if opts.Budget, err = MemberBudget(); err != nil {
			return nil, fmt.Errorf("shard %s: %w", spec.Id, err)
		}
	}
	if labeled.BlockCacheBytes != 0 {
		opts.BlockCacheBytes = labeled.BlockCacheBytes
	}
	if labeled.RowCacheBytes != 0 {
		opts.RowCacheBytes = labeled.RowCacheBytes
	}
	if labeled.Compression != "" {
		opts.Compression = labeled.Compression
	}
	s, err := Open(rec.Dir(), fr, opts)
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", spec.Id, err)
	}
	return s, nil
}

var _ runtime.StoreOpener = Opener{}
