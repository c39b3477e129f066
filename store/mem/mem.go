// Package mem is a runtime.KVStore held in memory, for tests and for
// consumers whose state need not outlive their process. Its transactions
// are those of package txnkv, as store rocks's are, over a DB in memory.
//
// A DB holds what its stores committed, and outlives them, as a recovery log
// outlives the RocksDB stores played back from it: a Store dropped mid-
// transaction (as a failed shard drops its store) loses that transaction,
// and a Store opened again on its DB resumes from the last checkpoint
// committed. Opening a DB fences the Stores opened on it before: their
// commits fail, as those of a RocksDB store fenced by another player of its
// recovery log do.
package mem

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"github.com/google/btree"
	"go.gazette.dev/core/broker/client"
)

// ErrFenced fails the commits of a Store whose DB was opened again since.
var ErrFenced = errors.New("the store's DB was opened by another store")

// DB holds the committed rows of an in-memory store, and its checkpoint.
// Its methods may be called concurrently.
type DB struct {
	mu    sync.Mutex                        // Serializes commits and Opens.
	rows  atomic.Pointer[btree.BTreeG[row]] // Committed rows, never modified once stored.
	epoch uint64                            // Of the last Open.
}

// row is a key and its value.
type row struct{ key, value []byte }

func rowLess(a, b row) bool { return bytes.Compare(a.key, b.key) < 0 }

// NewDB returns an empty DB.
func NewDB() *DB {
	var db = new(DB)
	db.rows.Store(btree.NewG(32, rowLess))
	return db
}

// Snapshot returns a read-only view of the rows db holds now, committed,
// and their checkpoint: its writes fail with txnkv.ErrReadOnly. It may be
// read concurrently.
func (db *DB) Snapshot() *txnkv.ReadOnly { return txnkv.NewReadOnly("", db.version()) }

// Link makes db hold the rows from holds now, committed, and their
// checkpoint, in place of its own, as a RocksDB store opened on links of
// another's files holds the other's (see runtime.FileLinker): they're
// shared, and each DB's later commits are its own.
func (db *DB) Link(from *DB) {
	from.mu.Lock()
	var rows = from.rows.Load().Clone() // Clone marks the tree shared, which commits of from's Clone too.
	from.mu.Unlock()
	db.mu.Lock()
	db.rows.Store(rows)
	db.mu.Unlock()
}

// version returns the rows db holds now.
func (db *DB) version() version { return version{db.rows.Load()} }

// Store is a runtime.KVStore of a DB: the transactional layer of package
// txnkv over the DB's rows. Its KV methods and StartCommit are called from
// the shard's one goroutine; commits complete in the background, once every
// future of their waitFor has succeeded, writing to the DB atomically. A
// commit whose waitFor fails, or abandoned by Destroy, is never written, and
// the DB stays at the previous checkpoint. ReadCommitted reads the DB's rows
// as last committed: a store of a DB commits durably once it writes, so a
// view is never of a commit still in flight. Destroy abandons the current
// transaction; the DB keeps what was committed.
type Store struct {
	*txnkv.Store
	b *base
}

var (
	_ runtime.KVStore         = (*Store)(nil)
	_ runtime.KV              = (*Store)(nil)
	_ runtime.CommittedReader = (*Store)(nil)
	_ runtime.Loader          = (*Store)(nil)
	_ runtime.TxnSizer        = (*Store)(nil)
	_ runtime.RangeSizer      = (*Store)(nil)
)

// Open returns a Store of db, which resumes from its last commit. Commits of
// Stores opened on db before fail from now on with ErrFenced.
func Open(db *DB) *Store {
	db.mu.Lock()
	db.epoch++
	var b = &base{db: db, epoch: db.epoch}
	db.mu.Unlock()
	return &Store{txnkv.New(b.name(), b), b}
}

// KV returns s: its view of the current transaction.
func (s *Store) KV() runtime.KV { return s }

// BeginLoad begins a load of rows to the DB of a store which has committed
// nothing yet (runtime.Loader): they're written to it past its
// transactions at Finish. Loaded again, the same rows replace those
// before.
func (s *Store) BeginLoad() (runtime.Loading, error) {
	s.b.db.mu.Lock()
	defer s.b.db.mu.Unlock()
	if err := s.b.loadable(); err != nil {
		return nil, err
	}
	return &loading{s: s}, nil
}

// loadable fails if rows may not be loaded to b's DB: b is fenced, or its
// store committed. The caller holds the DB's lock.
func (b *base) loadable() error {
	if b.epoch != b.db.epoch {
		return ErrFenced
	} else if cp, _ := b.db.version().Checkpoint(); cp != nil {
		return fmt.Errorf("store %s: can't load rows into a store which has committed", b.name())
	}
	return nil
}

// loading is a load of a Store begun by BeginLoad: its rows, until Finish.
type loading struct {
	s    *Store
	rows []row
	done bool
}

// Add adds a row, after the last.
func (l *loading) Add(key, value []byte) error {
	if l.done {
		return fmt.Errorf("store %s: a row added to a load ended", l.s.b.name())
	} else if n := len(l.rows); n != 0 && bytes.Compare(key, l.rows[n-1].key) <= 0 {
		return fmt.Errorf("store %s: rows to load out of order: %q after %q", l.s.b.name(), key, l.rows[n-1].key)
	}
	l.rows = append(l.rows, row{key: bytes.Clone(key), value: bytes.Clone(value)})
	return nil
}

// Finish writes the rows to the DB, unless the store was fenced or
// committed since the load began.
func (l *loading) Finish() (int, error) {
	if l.done {
		return 0, fmt.Errorf("store %s: a load finished after its end", l.s.b.name())
	}
	l.done = true
	var b = l.s.b
	b.db.mu.Lock()
	defer b.db.mu.Unlock()
	if err := b.loadable(); err != nil {
		return 0, err
	}
	var next = b.db.rows.Load().Clone()
	for _, r := range l.rows {
		next.ReplaceOrInsert(r)
	}
	b.db.rows.Store(next)
	return len(l.rows), nil
}

// Abort drops the rows.
func (l *loading) Abort() { l.done, l.rows = true, nil }

// base is the txnkv.Base of a Store: the rows of its DB.
type base struct {
	db    *DB
	epoch uint64
}

var _ txnkv.Base = (*base)(nil)

// name names the store of b in errors.
func (b *base) name() string { return fmt.Sprintf("in memory (open #%d)", b.epoch) }

// Get returns the committed value of key.
func (b *base) Get(key []byte) ([]byte, bool, error) { return b.db.version().Get(key) }

// Scan calls fn with the committed rows of [start, end).
func (b *base) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	return b.db.version().Scan(start, end, fn)
}

// Checkpoint returns the checkpoint of the last commit.
func (b *base) Checkpoint() ([]byte, error) { return b.db.version().Checkpoint() }

// ApproximateSizes returns the bytes of the keys and values committed in
// each of ranges, exactly: it goes through their rows.
func (s *Store) ApproximateSizes(ranges [][2][]byte) ([]uint64, error) {
	var v, out = s.b.db.version(), make([]uint64, len(ranges))
	for i, r := range ranges {
		_ = v.Scan(r[0], r[1], func(key, value []byte) bool {
			out[i] += uint64(len(key) + len(value))
			return true
		})
	}
	return out, nil
}

// Write applies w and the checkpoint to a copy of the DB's rows, which then
// replaces them: reads of the rows before go on undisturbed.
func (b *base) Write(w *txnkv.Overlay, checkpoint []byte) (client.OpFuture, error) {
	b.db.mu.Lock()
	defer b.db.mu.Unlock()
	if b.epoch != b.db.epoch {
		return nil, ErrFenced
	}
	// The copy shares the rows' nodes, copying those it changes.
	var next = b.db.rows.Load().Clone()
	w.Ascend(nil, nil, func(e txnkv.Entry) bool {
		if e.Deleted {
			next.Delete(row{key: e.Key})
		} else {
			// Copies: the entry's bytes share the overlay's slabs.
			next.ReplaceOrInsert(row{key: bytes.Clone(e.Key), value: bytes.Clone(e.Value)})
		}
		return true
	})
	next.ReplaceOrInsert(row{key: []byte(txnkv.CheckpointKey), value: checkpoint})
	b.db.rows.Store(next)
	return client.FinishedOperation(nil), nil
}

// Settled has nothing to do: the DB's rows are the committed state.
func (b *base) Settled(*txnkv.Overlay) {}

// Shared returns the DB's rows as they are now: they are never modified.
func (b *base) Shared() runtime.Reader { return b.db.version() }

// version is a version of a DB's rows, never modified: a txnkv.Committed,
// which may be read concurrently.
type version struct{ rows *btree.BTreeG[row] }

var _ txnkv.Committed = version{}

// Get returns the value of key, and whether it exists.
func (v version) Get(key []byte) ([]byte, bool, error) {
	var r, ok = v.rows.Get(row{key: key})
	return r.value, ok, nil
}

// Scan calls fn with the rows of [start, end) in order, until it returns
// false.
func (v version) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	var visit = func(r row) bool { return fn(r.key, r.value) }
	if end == nil {
		v.rows.AscendGreaterOrEqual(row{key: start}, visit)
	} else {
		v.rows.AscendRange(row{key: start}, row{key: end}, visit)
	}
	return nil
}

// Checkpoint returns the marshaled checkpoint of the rows, or nil.
func (v version) Checkpoint() ([]byte, error) {
	var r, _ = v.rows.Get(row{key: []byte(txnkv.CheckpointKey)})
	return r.value, nil
}
