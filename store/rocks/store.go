package rocks

// #include "shim.h"
import "C"

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/cgo"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"github.com/linxGnu/grocksdb"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// ReservedPrefix begins the keys the store keeps for itself. Keys written
// through the KV may not begin with it; generated tables prefix their keys
// with an encoding of the table name, which never does.
const ReservedPrefix = txnkv.ReservedPrefix

// checkpointKey holds the marshaled pc.Checkpoint of the last commit.
var checkpointKey = []byte(txnkv.CheckpointKey)

// Store is a runtime.KVStore in RocksDB, recorded into a recovery log. Its
// transactions are those of package txnkv, over the database as their Base.
// Its KV methods and StartCommit are called from the shard's one goroutine;
// commits complete in the background. A commit's writes and checkpoint are
// written to the database as one WriteBatch once every future of its
// waitFor has succeeded (never if one fails: the store stays at the
// previous checkpoint), and its future resolves when the recovery log holds
// that write. ReadCommitted reads the database as of its last durable
// commit: if a commit written to the database is not yet held by the
// recovery log, it waits until it is, so that readers never see a write
// that a failure of the log would undo.
type Store struct {
	*txnkv.Store

	dir    string
	rec    *recording
	handle cgo.Handle

	budget *Budget         // Shared with other stores, if not nil.
	cache  *grocksdb.Cache // The store's own block cache, if not nil.
	bbto   *grocksdb.BlockBasedTableOptions
	opts   *grocksdb.Options
	ro     *grocksdb.ReadOptions
	wo     *grocksdb.WriteOptions
	db     *grocksdb.DB
	cdb    unsafe.Pointer // The rocksdb_t of db, for get.
	cro    unsafe.Pointer // The rocksdb_readoptions_t of ro, for get.
	cwo    unsafe.Pointer // The rocksdb_writeoptions_t of wo, for batch.
	batch  *batchBuffer   // Representations of the batches written.
	// memtable is the size of the database's memtable, while it follows
	// its budget's share (see resizeMemtable); zero if it doesn't.
	memtable int64
	// walBound is the bytes of write-ahead log past which a commit has the
	// database flush its memtable: the memtable's size. A memtable of rows
	// updated in place may hold a small part of what its log does (each
	// rewrite of a row is logged), and a store opening replays all of it.
	walBound int64

	rows    *rowCache      // Rows as of the last settled commit; nil if disabled.
	getBuf  []byte         // Value last returned by Get from the database, without a row cache.
	multi   multiGet       // Keys and values of the last Prefetch's MultiGet.
	closing chan struct{}  // Closed by Destroy.
	tasks   sync.WaitGroup // Background tasks (log compaction, compactions and flushes asked).
	compact atomic.Bool    // A compaction of all files is asked after the next write.
	// asked guards tasks begun in the background (flushInBackground)
	// against Destroy: none starts once it closed closing.
	asked    sync.Mutex
	flushing atomic.Bool   // A flush in the background is under way (flushInBackground).
	flushEnd chan struct{} // Closed once the last flush in the background ends; guarded by asked.
}

// logCompacter is implemented by a FileRecorder which can compact its log,
// as *recoverylog.Recorder does.
type logCompacter interface {
	Compact(context.Context, recoverylog.Compaction) (recoverylog.CompactResult, error)
	Journal() pb.Journal
}

var (
	_ runtime.KVStore         = (*Store)(nil)
	_ runtime.KV              = (*Store)(nil)
	_ runtime.CommittedReader = (*Store)(nil)
	_ runtime.Loader          = (*Store)(nil)
	_ runtime.Compactor       = (*Store)(nil)
	_ runtime.Flusher         = (*Store)(nil)
	_ runtime.TxnSizer        = (*Store)(nil)
	_ txnkv.Base              = (*database)(nil)
	_ txnkv.HashedBase        = (*database)(nil)
	_ txnkv.PrefetchBase      = (*database)(nil)
)

// Open opens (creating it if need be) the RocksDB database in dir, whose
// file operations rec records. Dir holds the files played back from the
// recovery log, if any.
func Open(dir string, rec FileRecorder, o Options) (*Store, error) {
	var compression, err = o.compression()
	if err != nil {
		return nil, err
	}
	var s = &Store{
		dir:     dir,
		rec:     &recording{FileRecorder: rec},
		closing: make(chan struct{}),
	}
	s.handle = cgo.NewHandle(s.rec)
	var env *grocksdb.Env
	if env, err = newRecordedEnv(s.handle); err != nil {
		s.handle.Delete()
		return nil, fmt.Errorf("opening store %s: %w", dir, err)
	}
	s.bbto = grocksdb.NewDefaultBlockBasedTableOptions()
	if o.Budget == nil || o.BlockCacheBytes != 0 {
		var cacheBytes = o.BlockCacheBytes
		if cacheBytes == 0 {
			cacheBytes = DefaultBlockCacheBytes
		}
		s.cache = grocksdb.NewLRUCache(cacheBytes)
		s.bbto.SetBlockCache(s.cache)
	}
	s.bbto.SetFilterPolicy(grocksdb.NewBloomFilter(10))

	s.opts = grocksdb.NewDefaultOptions()
	if o.Budget != nil {
		// Index and filter blocks are charged to the budget's cache too
		// (those of level 0, read by every Get, pinned there), rather than
		// held beside it for every open file.
		s.bbto.SetCacheIndexAndFilterBlocks(true)
		s.bbto.SetPinL0FilterAndIndexBlocksInCache(true)
		// Before the table factory copies s.bbto.
		if s.memtable, err = o.Budget.attach(s.bbto, s.opts, s.cache == nil); err != nil {
			s.opts.Destroy()
			s.bbto.Destroy()
			if s.cache != nil {
				s.cache.Destroy()
			}
			env.Destroy()
			s.handle.Delete()
			return nil, fmt.Errorf("opening store %s: %w", dir, err)
		}
		s.budget = o.Budget
	}
	s.opts.SetBlockBasedTableFactory(s.bbto)
	s.opts.SetCompression(compression)
	s.opts.SetInfoLogLevel(grocksdb.WarnInfoLogLevel)
	s.opts.SetMaxManifestFileSize(DefaultMaxManifestFileSize)
	s.opts.SetMaxLogFileSize(DefaultMaxInfoLogFileSize)
	s.opts.SetKeepLogFileNum(DefaultKeepInfoLogFiles)
	// Transactions rewrite the same rows over and over: update a row in the
	// memtable in place (when its new value is no longer) rather than add a
	// version of it, which keeps the memtable as small as the rows written
	// and its inserts shallow. This forgoes consistent snapshots and
	// iterators under concurrent writes, which the store doesn't need: its
	// one writer is the commit, and reads shadow the rows of a commit in
	// flight with the commit's own batch until it is written. In-place
	// updates need memtable writes from one thread at a time.
	s.opts.SetAllowConcurrentMemtableWrites(false)
	s.opts.SetInplaceUpdateSupport(true)
	// A Bloom filter of the memtable's keys: most Gets of a large key space
	// are of keys the memtable doesn't hold (often of keys the database
	// doesn't hold at all, as a key is first met), which the filter answers
	// without a search of the memtable's skip list. RocksDB's own, which
	// filterMemtable (below) turns off where the memtable's filter of its
	// keys answers Gets too: it stays for memtables Tune made otherwise.
	s.opts.SetMemTablePrefixBloomSizeRatio(DefaultMemtableBloomRatio)
	s.opts.SetMemtableWholeKeyFiltering(true)
	if o.Tune != nil {
		o.Tune(s.opts)
		if int64(s.opts.GetWriteBufferSize()) != s.memtable {
			s.memtable = 0 // Tuned: it keeps the size Tune gave it.
		}
	}
	s.walBound = int64(s.opts.GetWriteBufferSize())
	s.opts.SetEnv(env) // Owned by s.opts from here.
	s.opts.SetCreateIfMissing(true)
	s.opts.SetRecycleLogFileNum(0)

	s.ro = grocksdb.NewDefaultReadOptions()
	s.wo = grocksdb.NewDefaultWriteOptions() // Durability comes from the recorder's Barrier.
	if s.budget != nil && o.RowCacheBytes == 0 {
		s.rows = newSharedRowCache(s.budget.rows)
	} else {
		s.rows = newRowCache(o.rowCacheBytes())
	}

	if err = filterMemtable(s.opts); err != nil {
		s.release()
		return nil, fmt.Errorf("opening store %s: %w", dir, err)
	}
	sizeFlushThreads()
	// What an open costs is mostly RocksDB's replay of the write-ahead
	// logs its memtables had not flushed (a recovered or linked store's):
	// their bytes are logged with its time, at debug. Whole logs are kept,
	// unflushed (see wholeWAL).
	var began = time.Now()
	var walBytes, keep = wholeWALs(dir)
	if keep {
		var copts unsafe.Pointer
		if copts, err = cPointer(s.opts); err != nil {
			s.release()
			return nil, fmt.Errorf("opening store %s: %w", dir, err)
		}
		C.gc_options_set_avoid_flush_during_recovery(copts, 1)
	}
	if s.db, err = grocksdb.OpenDb(s.opts, dir); err != nil {
		s.release()
		return nil, fmt.Errorf("opening store %s: %w", dir, err)
	}
	if keep {
		// The memtable holds what the kept logs do, beside the new log.
		s.rec.walBytes.Add(walBytes)
	}
	slog.Debug("store opened", "dir", dir, "walBytes", walBytes, "walsKept", keep, "took", time.Since(began))
	if s.cdb, s.cro, err = cHandles(s.db, s.ro); err == nil {
		s.cwo, err = cPointer(s.wo)
	}
	if err != nil {
		s.release()
		return nil, fmt.Errorf("opening store %s: %w", dir, err)
	}
	s.batch = newBatchBuffer()
	s.Store = txnkv.New(dir, (*database)(s))
	if lc, ok := rec.(logCompacter); ok {
		var policy, every = o.logCompaction()
		if policy.Ratio > 0 {
			s.tasks.Go(func() { s.compactLog(lc, policy, every) })
		}
	}
	return s, nil
}

// compactLog compacts the recovery log by policy every interval, until the
// store is destroyed. A failure is logged: if the recorder failed, commits
// fail too.
func (s *Store) compactLog(lc logCompacter, policy recoverylog.Compaction, every time.Duration) {
	var ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.closing
		cancel()
	}()
	var ticker = time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C:
		case <-s.closing:
			return
		}
		var res, err = lc.Compact(ctx, policy)
		if err != nil && ctx.Err() == nil {
			slog.Warn("compacting recovery log", "journal", lc.Journal(), "dir", s.dir, "err", err)
		} else if res.Files != 0 {
			slog.Info("compacted recovery log", "journal", lc.Journal(), "dir", s.dir,
				"span", res.Span, "liveBytes", res.LiveBytes, "files", res.Files, "bytes", res.Bytes)
		}
	}
}

// DB is the underlying database, for tuning and inspection (flushes,
// compactions, properties). Writes made directly to it bypass transactions
// and the store's row cache: Get may not see them until DropRowCache.
func (s *Store) DB() *grocksdb.DB { return s.db }

// DropRowCache empties the store's cache of database rows (see
// Options.RowCacheBytes), after writes made directly to DB.
func (s *Store) DropRowCache() { s.rows.clear() }

// KV returns s: its view of the current transaction.
func (s *Store) KV() runtime.KV { return s }

// database is a Store seen as the Base of its transactions: the RocksDB
// database, read through the row cache.
type database Store

// Get returns the value of key in the database, from the row cache if it
// holds the key.
func (d *database) Get(key []byte) ([]byte, bool, error) {
	return d.GetHashed(key, txnkv.HashKey(key))
}

// GetHashed is Get of key, whose hash (txnkv.HashKey) is h.
func (d *database) GetHashed(key []byte, h uint64) ([]byte, bool, error) {
	if r, ok := d.rows.getHashed(key, h); ok {
		return r.value, !r.absent, nil
	}
	var v, found, err = (*Store)(d).get(key, d.getBuf)
	if err != nil {
		return nil, false, err
	}
	d.getBuf = v[:0]
	d.rows.putHashed(key, h, v, !found) // Copies v.
	return v, found, nil
}

// Prefetch reads the keys which the row cache doesn't hold from the
// database, in one MultiGet, into the row cache, and returns how many it
// read. Without a row cache, it reads none.
//
// It reads a key once however often keys holds it, and adds the rows it
// read to the cache without looking for them there again: the cache,
// which only the store's goroutine changes, holds none of them, as its
// lookups of the keys found. (Of two keys of one hash, a chance in 2^64,
// it reads only the first, which costs the second's Get a read of its
// own.)
func (d *database) Prefetch(keys [][]byte, hashes []uint64) (int, error) {
	if d.rows == nil {
		return 0, nil
	}
	var m = &d.multi
	m.reset()
	for i, key := range keys {
		if _, ok := d.rows.getHashed(key, hashes[i]); !ok && m.first(hashes[i]) {
			m.add(key, hashes[i])
		}
	}
	if len(m.hashes) == 0 {
		return 0, nil
	}
	if err := (*Store)(d).multiGet(m); err != nil {
		return 0, err
	}
	for i, h := range m.hashes {
		var v, found = m.value(i)
		d.rows.addHashed(m.key(i), h, v, !found) // Copies v.
	}
	return len(m.hashes), nil
}

// Scan iterates the database's keys in [start, end).
func (d *database) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	return scan(d.cdb, d.cro, start, end, fn)
}

// Checkpoint reads the checkpoint of the last commit written.
func (d *database) Checkpoint() ([]byte, error) { return reader{db: d.db, ro: d.ro}.Checkpoint() }

// Write writes w and the checkpoint to the database as one WriteBatch; the
// returned future resolves once the recovery log holds the write.
func (d *database) Write(w *txnkv.Overlay, checkpoint []byte) (client.OpFuture, error) {
	var err = d.resizeMemtable()
	if err == nil {
		err = d.batch.write(d.cdb, d.cwo, batchLen(w, len(checkpointKey)+len(checkpoint)), func(b []byte) []byte {
			return appendBatch(b, w, checkpointKey, checkpoint)
		})
	}
	if err != nil {
		if rerr := d.rec.failure(); rerr != nil {
			return nil, fmt.Errorf("recording: %w (rocksdb: %v)", rerr, err)
		}
		return nil, err
	}
	if d.compact.CompareAndSwap(true, false) {
		d.tasks.Go((*Store)(d).compactAll)
	}
	if d.rec.walBytes.Load() > d.walBound {
		(*Store)(d).flushInBackground("its write-ahead log passed its memtable's size")
	}
	return loggedWrite{d.rec.Barrier(nil)}, nil
}

// resizeMemtable gives the database's memtable the size its budget now
// gives each store, if that changed since it was set: as stores of the
// budget opened or closed. Commits call it before they write, one at a
// time.
func (d *database) resizeMemtable() error {
	if d.memtable == 0 {
		return nil
	}
	var want = d.budget.memtable.Load()
	if want == d.memtable {
		return nil
	}
	if err := d.db.SetOptions([]string{"write_buffer_size"}, []string{strconv.FormatInt(want, 10)}); err != nil {
		return fmt.Errorf("sizing the memtable of store %s to %d bytes: %w", d.dir, want, err)
	} else if err = resizeFilteredMemtable(d.opts, want); err != nil {
		return fmt.Errorf("sizing the memtable filter of store %s for %d bytes: %w", d.dir, want, err)
	}
	d.memtable, d.walBound = want, want
	return nil
}

// CompactAfterCommit has the database rewrite all its files, down to its
// last level, in the background, once the next commit is written
// (runtime.Compactor). Destroy cancels it.
func (s *Store) CompactAfterCommit() { s.compact.Store(true) }

// FlushAhead begins a flush of the database's memtables in the background
// (runtime.Flusher), unless one it began is under way or the store is
// destroyed: a later link of its files (Opener.LinkFiles) then flushes only
// what was written since.
func (s *Store) FlushAhead() { s.flushInBackground("ahead of a link") }

// flushInBackground begins a flush of the database's memtables in the
// background, for why, unless one it began is under way or the store is
// destroyed.
func (s *Store) flushInBackground(why string) {
	s.asked.Lock()
	defer s.asked.Unlock()
	select {
	case <-s.closing:
		return
	default:
	}
	if !s.flushing.CompareAndSwap(false, true) {
		return
	}
	var end = make(chan struct{})
	s.flushEnd = end
	s.tasks.Go(func() {
		defer close(end)
		defer s.flushing.Store(false)
		var began = time.Now()
		var fo = grocksdb.NewDefaultFlushOptions()
		defer fo.Destroy()
		fo.SetWait(true)
		if err := s.db.Flush(fo); err != nil {
			// A link flushes anyway, and a failure to write files fails
			// the next commit: this flush only saves them time.
			slog.Warn("store's flush failed", "dir", s.dir, "why", why, "err", err)
			return
		}
		slog.Debug("store flushed", "dir", s.dir, "why", why, "took", time.Since(began))
	})
}

// awaitFlush waits until a flush in the background under way, if any, ends,
// or ctx is done.
func (s *Store) awaitFlush(ctx context.Context) error {
	s.asked.Lock()
	var end = s.flushEnd
	s.asked.Unlock()
	if end == nil {
		return nil
	}
	select {
	case <-end:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// compactAll rewrites the files of the database, down to its last level.
func (s *Store) compactAll() {
	var began = time.Now()
	var o = grocksdb.NewCompactRangeOptions()
	defer o.Destroy()
	o.SetBottommostLevelCompaction(grocksdb.KForce)
	o.SetExclusiveManualCompaction(false)
	s.db.CompactRangeOpt(grocksdb.Range{}, o)
	select {
	case <-s.closing:
		slog.Info("store's compaction of its files ended as the store closed", "dir", s.dir, "took", time.Since(began))
	default:
		slog.Info("store compacted its files", "dir", s.dir, "took", time.Since(began))
	}
}

// loggedWrite is the future of a write held by the recovery log.
type loggedWrite struct{ client.OpFuture }

// Err returns the error of recording the write, if any.
func (r loggedWrite) Err() error {
	if err := r.OpFuture.Err(); err != nil {
		return fmt.Errorf("recording: %w", err)
	}
	return nil
}

// Settled caches the rows of w, now read from the database.
func (d *database) Settled(w *txnkv.Overlay) { d.rows.commit(w) }

// Shared returns a reader of the database for another goroutine than the
// store's: it reads RocksDB directly, past the row cache (which only the
// store's goroutine uses).
func (d *database) Shared() runtime.Reader { return &sharedReader{s: (*Store)(d)} }

// sharedReader reads the database from a goroutine of its own.
type sharedReader struct {
	s   *Store
	buf []byte // Value last returned by Get.
}

// Get returns the value of key in the database.
func (r *sharedReader) Get(key []byte) ([]byte, bool, error) {
	var v, found, err = r.s.get(key, r.buf)
	if err != nil {
		return nil, false, err
	}
	r.buf = v[:0]
	return v, found, nil
}

// Scan iterates the database's keys in [start, end).
func (r *sharedReader) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	return scan(r.s.cdb, r.s.cro, start, end, fn)
}

// reader reads a database directly, with RocksDB's own calls: a
// txnkv.Committed, for ReadOnly and the checkpoint of a Store.
type reader struct {
	db       *grocksdb.DB
	ro       *grocksdb.ReadOptions
	cdb, cro unsafe.Pointer // The C objects of db and ro, for scan.
}

var _ txnkv.Committed = reader{}

// Get returns the value of key in the database.
func (r reader) Get(key []byte) ([]byte, bool, error) {
	var v, err = r.db.GetBytes(r.ro, key)
	return v, v != nil, err
}

// Scan iterates the database's keys in [start, end).
func (r reader) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	return scan(r.cdb, r.cro, start, end, fn)
}

// Checkpoint reads the checkpoint of the last commit written.
func (r reader) Checkpoint() ([]byte, error) { return r.db.GetBytes(r.ro, checkpointKey) }

// Destroy closes the database, abandoning the current transaction and any
// commit still waiting, and removes the store's local files.
func (s *Store) Destroy() {
	s.close()
	if err := os.RemoveAll(s.dir); err != nil {
		slog.Warn("removing store files", "dir", s.dir, "err", err)
	}
}

// close closes the database, abandoning the current transaction and any
// commit still waiting, once its background tasks end; its files remain.
func (s *Store) close() {
	s.asked.Lock()
	close(s.closing)
	s.asked.Unlock()
	s.Store.Destroy()
	s.db.DisableManualCompaction() // Ends a compactAll.
	s.tasks.Wait()
	s.release()
}

// release closes the database and frees its resources.
func (s *Store) release() {
	if s.db != nil {
		s.db.Close()
		s.db = nil
	}
	if s.batch != nil {
		s.batch.free()
	}
	s.ro.Destroy()
	s.wo.Destroy()
	s.opts.Destroy()
	s.bbto.Destroy()
	if s.cache != nil {
		s.cache.Destroy()
	}
	if s.budget != nil {
		s.rows.close()
		s.budget.detach()
		s.budget = nil
	}
	s.handle.Delete()
}
