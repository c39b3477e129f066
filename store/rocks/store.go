package rocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	goruntime "runtime"
	"runtime/cgo"
	"sync"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/linxGnu/grocksdb"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

// ReservedPrefix begins the keys the store keeps for itself. Keys written
// through the KV may not begin with it; generated tables prefix their keys
// with an encoding of the table name, which never does.
const ReservedPrefix = 0x00

// checkpointKey holds the marshaled pc.Checkpoint of the last commit.
var checkpointKey = []byte("\x00checkpoint")

// Store is a runtime.KVStore in RocksDB, recorded into a recovery log. Its KV
// methods and StartCommit are called from the shard's one goroutine; commits
// complete in the background.
type Store struct {
	dir    string
	rec    *recording
	handle cgo.Handle

	cache *grocksdb.Cache
	bbto  *grocksdb.BlockBasedTableOptions
	opts  *grocksdb.Options
	ro    *grocksdb.ReadOptions
	wo    *grocksdb.WriteOptions
	db    *grocksdb.DB

	txn     *overlay       // Writes of the current transaction.
	pending *commit        // Commit in flight, if any.
	rows    *rowCache      // Rows as of the last settled commit; nil if disabled.
	getBuf  []byte         // Value last returned by Get from the database, without a row cache.
	closing chan struct{}  // Closed by Destroy.
	commits sync.WaitGroup // Background commits.
	tasks   sync.WaitGroup // Other background tasks (log compaction).
}

// logCompacter is implemented by a FileRecorder which can compact its log,
// as *recoverylog.Recorder does.
type logCompacter interface {
	Compact(context.Context, recoverylog.Compaction) (recoverylog.CompactResult, error)
	Journal() pb.Journal
}

// commit is a transaction's writes on their way to the database.
type commit struct {
	ov         *overlay
	checkpoint []byte        // Marshaled checkpoint, written with ov.
	done       chan struct{} // Closed once ov is written, or the commit failed.
	err        error         // Set before done closes.
}

var (
	_ runtime.KVStore = (*Store)(nil)
	_ runtime.KV      = (*Store)(nil)
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
	var cacheBytes = o.BlockCacheBytes
	if cacheBytes == 0 {
		cacheBytes = DefaultBlockCacheBytes
	}
	s.cache = grocksdb.NewLRUCache(cacheBytes)
	s.bbto = grocksdb.NewDefaultBlockBasedTableOptions()
	s.bbto.SetBlockCache(s.cache)
	s.bbto.SetFilterPolicy(grocksdb.NewBloomFilter(10))

	s.opts = grocksdb.NewDefaultOptions()
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
	if o.Tune != nil {
		o.Tune(s.opts)
	}
	s.opts.SetEnv(env) // Owned by s.opts from here.
	s.opts.SetCreateIfMissing(true)
	s.opts.SetRecycleLogFileNum(0)

	s.ro = grocksdb.NewDefaultReadOptions()
	s.wo = grocksdb.NewDefaultWriteOptions() // Durability comes from the recorder's Barrier.
	s.txn = newOverlay()
	s.rows = newRowCache(o.rowCacheBytes())

	if s.db, err = grocksdb.OpenDb(s.opts, dir); err != nil {
		s.release()
		return nil, fmt.Errorf("opening store %s: %w", dir, err)
	}
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

// RestoreCheckpoint returns the checkpoint of the last commit written to the
// database, or a zero-valued one if there was none.
func (s *Store) RestoreCheckpoint(runtime.Shard) (pc.Checkpoint, error) {
	var cp pc.Checkpoint
	var v, err = s.db.GetBytes(s.ro, checkpointKey)
	if err != nil {
		return cp, fmt.Errorf("store %s: reading checkpoint: %w", s.dir, err)
	} else if v == nil {
		return cp, nil
	} else if err = cp.Unmarshal(v); err != nil {
		return cp, fmt.Errorf("store %s: decoding checkpoint: %w", s.dir, err)
	}
	return cp, nil
}

// StartCommit adds cp to the current transaction's batch and starts its
// commit: once every future of waitFor has succeeded, and the previous
// commit has, the batch is written to the database, and the returned future
// resolves when the recovery log holds that write. If a future of waitFor
// fails, the batch is never written and the store stays at the previous
// checkpoint. The next transaction starts at once, on a new batch. If the
// previous commit's batch is not yet written, StartCommit first waits for it.
func (s *Store) StartCommit(_ runtime.Shard, cp pc.Checkpoint, waitFor client.OpFutures) client.OpFuture {
	// Reads consult one commit in flight: a commit started before the
	// previous one is written (which a runtime's pipeline never does: it
	// starts a commit once the previous one has resolved) waits for it.
	if s.pending != nil {
		select {
		case <-s.pending.done:
		case <-s.closing:
			return client.FinishedOperation(fmt.Errorf("store %s: destroyed", s.dir))
		}
	}
	if err := s.settle(); err != nil {
		return client.FinishedOperation(err)
	}
	var b, err = cp.Marshal()
	if err != nil {
		return client.FinishedOperation(fmt.Errorf("store %s: encoding checkpoint: %w", s.dir, err))
	}
	s.txn.freeze() // Read concurrently from here.
	var c = &commit{ov: s.txn, checkpoint: b, done: make(chan struct{})}
	var prev = s.pending
	s.txn, s.pending = newOverlay(), c

	var op = client.NewAsyncOperation()
	s.commits.Go(func() { op.Resolve(s.commit(c, prev, waitFor)) })
	return op
}

// commit writes c once prev and waitFor are done, and waits for the log.
func (s *Store) commit(c, prev *commit, waitFor client.OpFutures) error {
	c.err = func() error {
		if prev != nil {
			<-prev.done
			if prev.err != nil {
				return fmt.Errorf("previous commit failed: %w", prev.err)
			}
		}
		for f := range waitFor {
			select {
			case <-f.Done():
			case <-s.closing:
				return errors.New("store destroyed")
			}
			if err := f.Err(); err != nil {
				return fmt.Errorf("waiting for the transaction's appends: %w", err)
			}
		}
		var rep = c.ov.appendBatch(make([]byte, 0, c.ov.batchLen(len(checkpointKey)+len(c.checkpoint))),
			checkpointKey, c.checkpoint)
		var wb = grocksdb.WriteBatchFrom(rep)
		defer wb.Destroy()
		if err := s.write(wb); err != nil {
			if rerr := s.rec.failure(); rerr != nil {
				return fmt.Errorf("recording: %w (rocksdb: %v)", rerr, err)
			}
			return err
		}
		return nil
	}()
	close(c.done)
	if c.err != nil {
		return fmt.Errorf("store %s: commit: %w", s.dir, c.err)
	}
	var barrier = s.rec.Barrier(nil)
	select {
	case <-barrier.Done():
	case <-s.closing:
		return fmt.Errorf("store %s: commit: store destroyed", s.dir)
	}
	if err := barrier.Err(); err != nil {
		return fmt.Errorf("store %s: commit: recording: %w", s.dir, err)
	}
	return nil
}

// write writes wb to the database with RocksDB's per-thread performance
// counters off on the writing thread. They are on by default, and counting
// every key comparison of a memtable insert takes about a third of the time
// of a write of many rows (with the shared librocksdb, each count is a
// lookup of thread-local storage).
func (s *Store) write(wb *grocksdb.WriteBatch) error {
	goruntime.LockOSThread() // The level is the thread's: write on that thread.
	defer goruntime.UnlockOSThread()
	grocksdb.SetPerfLevel(grocksdb.KDisable)
	return s.db.Write(s.wo, wb)
}

// settle releases the pending commit's batch once it's written, and returns
// its error if it failed.
func (s *Store) settle() error {
	if s.pending == nil {
		return nil
	}
	select {
	case <-s.pending.done:
	default:
		return nil
	}
	if err := s.pending.err; err != nil {
		return fmt.Errorf("store %s: a commit failed: %w", s.dir, err)
	}
	s.rows.commit(s.pending.ov)
	s.pending.ov.release()
	s.pending = nil
	return nil
}

// Get returns the value of key within the current transaction. The value
// is valid until the next call on the store, and must not be modified.
func (s *Store) Get(key []byte) ([]byte, bool, error) {
	if err := s.settle(); err != nil {
		return nil, false, err
	}
	if e, ok := s.txn.get(key); ok {
		return e.value, !e.deleted, nil
	} else if s.pending != nil {
		// A commit still in flight, whose writes may or may not be in the
		// database yet: they're the same in either place.
		if e, ok = s.pending.ov.get(key); ok {
			return e.value, !e.deleted, nil
		}
	}
	if r, ok := s.rows.get(key); ok {
		return r.value, !r.absent, nil
	}
	var v, err = s.db.Get(s.ro, key)
	if err != nil {
		return nil, false, fmt.Errorf("store %s: get: %w", s.dir, err)
	}
	defer v.Free()
	if !v.Exists() {
		s.rows.put(string(key), nil, true)
		return nil, false, nil
	}
	if s.rows == nil {
		s.getBuf = append(s.getBuf[:0], v.Data()...)
		return s.getBuf, true, nil
	}
	var value = append([]byte(nil), v.Data()...)
	s.rows.put(string(key), value, false)
	return value, true, nil
}

// Put sets key to value within the current transaction.
func (s *Store) Put(key, value []byte) error {
	if len(key) != 0 && key[0] == ReservedPrefix {
		return fmt.Errorf("store %s: put: key %q has the reserved prefix", s.dir, key)
	} else if len(key) > math.MaxUint32 || len(value) > math.MaxUint32 {
		return fmt.Errorf("store %s: put: key of %d bytes or value of %d bytes is too large", s.dir, len(key), len(value))
	}
	s.txn.put(key, value, false)
	return nil
}

// Delete removes key within the current transaction.
func (s *Store) Delete(key []byte) error {
	if len(key) != 0 && key[0] == ReservedPrefix {
		return fmt.Errorf("store %s: delete: key %q has the reserved prefix", s.dir, key)
	}
	s.txn.put(key, nil, true)
	return nil
}

// Scan calls fn with each key and value in [start, end) in order, as of the
// current transaction. Keys with the reserved prefix are skipped.
func (s *Store) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	if err := s.settle(); err != nil {
		return err
	}
	if len(start) == 0 || start[0] == ReservedPrefix {
		start = []byte{ReservedPrefix + 1}
	}
	var writes = s.writesIn(start, end)
	var it = s.db.NewIterator(s.ro)
	defer it.Close()

	// Merge the transactions' writes with the database, writes first.
	it.Seek(start)
	for {
		var dbKey []byte
		if it.Valid() {
			if dbKey = it.Key().Data(); end != nil && bytes.Compare(dbKey, end) >= 0 {
				dbKey = nil
			}
		}
		if dbKey == nil && len(writes) == 0 {
			break
		}
		var c int // Compare(dbKey, writes[0].key), where an absent key is greatest.
		if dbKey == nil {
			c = 1
		} else if len(writes) == 0 {
			c = -1
		} else {
			c = bytes.Compare(dbKey, writes[0].key)
		}
		var more = true
		if c < 0 {
			more = fn(dbKey, it.Value().Data())
		} else if w := writes[0]; !w.deleted {
			more = fn(w.key, w.value)
		}
		if c <= 0 {
			it.Next()
		}
		if c >= 0 {
			writes = writes[1:]
		}
		if !more {
			break
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("store %s: scan: %w", s.dir, err)
	}
	return nil
}

// writesIn returns the writes within [start, end) of the current
// transaction and of a commit still in flight, in key order. Where both
// wrote a key, the current transaction's write is returned.
func (s *Store) writesIn(start, end []byte) []entry {
	var cur []entry
	s.txn.ascend(start, end, func(e entry) bool { cur = append(cur, e); return true })
	if s.pending == nil {
		return cur
	}
	var out = make([]entry, 0, len(cur))
	s.pending.ov.ascend(start, end, func(e entry) bool {
		for len(cur) != 0 && bytes.Compare(cur[0].key, e.key) < 0 {
			out, cur = append(out, cur[0]), cur[1:]
		}
		if len(cur) != 0 && bytes.Equal(cur[0].key, e.key) {
			out, cur = append(out, cur[0]), cur[1:]
		} else {
			out = append(out, e)
		}
		return true
	})
	return append(out, cur...)
}

// Destroy closes the database, abandoning any commit still waiting, and
// removes the store's local files.
func (s *Store) Destroy() {
	close(s.closing)
	s.commits.Wait()
	s.tasks.Wait()
	s.release()
	if err := os.RemoveAll(s.dir); err != nil {
		slog.Warn("removing store files", "dir", s.dir, "err", err)
	}
}

// release closes the database and frees its resources.
func (s *Store) release() {
	if s.db != nil {
		s.db.Close()
		s.db = nil
	}
	if s.pending != nil {
		s.pending.ov.release()
		s.pending = nil
	}
	s.txn.release()
	s.ro.Destroy()
	s.wo.Destroy()
	s.opts.Destroy()
	s.bbto.Destroy()
	s.cache.Destroy()
	s.handle.Delete()
}
