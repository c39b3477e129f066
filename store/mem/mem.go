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
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"github.com/google/btree"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

// ErrFenced fails the commits of a Store whose DB was opened again since.
var ErrFenced = errors.New("the store's DB was opened by another store")

// ErrReadOnly is returned by writes to a Snapshot.
var ErrReadOnly = errors.New("a snapshot is read-only")

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

// Snapshot returns a read-only view of the rows db holds now, committed.
func (db *DB) Snapshot() *Snapshot { return &Snapshot{rows: db.rows.Load()} }

// Store is a runtime.KVStore of a DB. Its KV methods and StartCommit are
// called from the shard's one goroutine; commits complete in the
// background.
type Store struct {
	txns *txnkv.Store
}

var (
	_ runtime.KVStore         = (*Store)(nil)
	_ runtime.KV              = (*Store)(nil)
	_ runtime.CommittedReader = (*Store)(nil)
)

// Open returns a Store of db, which resumes from its last commit. Commits of
// Stores opened on db before fail from now on with ErrFenced.
func Open(db *DB) *Store {
	db.mu.Lock()
	db.epoch++
	var b = &base{db: db, epoch: db.epoch}
	db.mu.Unlock()
	return &Store{txns: txnkv.New(fmt.Sprintf("in memory (open #%d)", b.epoch), b)}
}

// KV returns s: its view of the current transaction.
func (s *Store) KV() runtime.KV { return s }

// RestoreCheckpoint returns the checkpoint of the last commit of the DB, or a
// zero-valued one if there was none.
func (s *Store) RestoreCheckpoint(shard runtime.Shard) (pc.Checkpoint, error) {
	return s.txns.RestoreCheckpoint(shard)
}

// StartCommit starts the commit of the current transaction's writes with
// cp: once every future of waitFor has succeeded, they are written to the DB
// atomically, and the returned future resolves. If a future of waitFor
// fails, or the store is destroyed first, they are never written, and the
// DB stays at the previous checkpoint. The next transaction starts at once,
// and sees the committing one's writes.
func (s *Store) StartCommit(shard runtime.Shard, cp pc.Checkpoint, waitFor client.OpFutures) client.OpFuture {
	return s.txns.StartCommit(shard, cp, waitFor)
}

// Get returns the value of key within the current transaction. The value
// is valid until the next call on the store, and must not be modified.
func (s *Store) Get(key []byte) ([]byte, bool, error) { return s.txns.Get(key) }

// Put sets key to value within the current transaction.
func (s *Store) Put(key, value []byte) error { return s.txns.Put(key, value) }

// Delete removes key within the current transaction.
func (s *Store) Delete(key []byte) error { return s.txns.Delete(key) }

// Scan calls fn with each key and value in [start, end) in order, as of the
// current transaction. Keys with the reserved prefix are skipped.
func (s *Store) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	return s.txns.Scan(start, end, fn)
}

// ReadCommitted calls fn with a view of the DB's rows as last committed:
// see runtime.CommittedReader. A store of a DB commits durably once it
// writes, so a view is never of a commit still in flight.
func (s *Store) ReadCommitted(ctx context.Context, fn func(runtime.Reader) error) error {
	return s.txns.ReadCommitted(ctx, fn)
}

// Destroy abandons the current transaction and any commit still waiting for
// its appends. The DB keeps what was committed.
func (s *Store) Destroy() { s.txns.Close() }

// base is the txnkv.Base of a Store: the rows of its DB.
type base struct {
	db    *DB
	epoch uint64
}

var _ txnkv.Base = (*base)(nil)

// Get returns the committed value of key.
func (b *base) Get(key []byte) ([]byte, bool, error) {
	var r, ok = b.db.rows.Load().Get(row{key: key})
	return r.value, ok, nil
}

// Scan calls fn with the committed rows of [start, end).
func (b *base) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	scan(b.db.rows.Load(), start, end, fn)
	return nil
}

// Checkpoint returns the checkpoint of the last commit.
func (b *base) Checkpoint() ([]byte, error) {
	var r, _ = b.db.rows.Load().Get(row{key: []byte(txnkv.CheckpointKey)})
	return r.value, nil
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

// Shared returns a Snapshot of the DB's rows: they are never modified.
func (b *base) Shared() runtime.Reader { return b.db.Snapshot() }

// scan calls fn with the rows of [start, end) in order, until it returns false.
func scan(rows *btree.BTreeG[row], start, end []byte, fn func(key, value []byte) bool) {
	var visit = func(r row) bool { return fn(r.key, r.value) }
	if end == nil {
		rows.AscendGreaterOrEqual(row{key: start}, visit)
	} else {
		rows.AscendRange(row{key: start}, row{key: end}, visit)
	}
}

// Snapshot is a read-only runtime.KV of the rows a DB held when it was
// taken, with their checkpoint. It may be read concurrently.
type Snapshot struct {
	rows *btree.BTreeG[row]
}

var _ runtime.KV = (*Snapshot)(nil)

// Checkpoint returns the checkpoint committed with the snapshot's rows.
func (s *Snapshot) Checkpoint() (pc.Checkpoint, error) {
	var cp pc.Checkpoint
	if r, ok := s.rows.Get(row{key: []byte(txnkv.CheckpointKey)}); ok {
		if err := cp.Unmarshal(r.value); err != nil {
			return cp, fmt.Errorf("decoding checkpoint: %w", err)
		}
	}
	return cp, nil
}

// ReadThrough returns the offsets through which the snapshot's checkpoint
// read its sources.
func (s *Snapshot) ReadThrough() (pb.Offsets, error) {
	var cp, err = s.Checkpoint()
	if err != nil {
		return nil, err
	}
	return pc.FlattenReadThrough(cp), nil
}

// Get returns the value of key, and whether it exists.
func (s *Snapshot) Get(key []byte) ([]byte, bool, error) {
	var r, ok = s.rows.Get(row{key: key})
	return r.value, ok, nil
}

// Put fails with ErrReadOnly.
func (s *Snapshot) Put(key, _ []byte) error { return fmt.Errorf("put %q: %w", key, ErrReadOnly) }

// Delete fails with ErrReadOnly.
func (s *Snapshot) Delete(key []byte) error { return fmt.Errorf("delete %q: %w", key, ErrReadOnly) }

// Scan calls fn with each key and value in [start, end) in order, until fn
// returns false. Keys with the reserved prefix are skipped.
func (s *Snapshot) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	if len(start) == 0 || start[0] == txnkv.ReservedPrefix {
		start = []byte{txnkv.ReservedPrefix + 1}
	}
	scan(s.rows, start, end, fn)
	return nil
}
