// Package txnkv is the transactional layer of gazconsumer's stores, apart
// from where they keep what they commit. A Store holds the writes of the
// current transaction in an Overlay with an ordered index; its reads see
// them merged over the writes of the commits still in flight (one, or two
// when a transaction hurried) and over its Base, which holds what was
// committed; StartCommit hands the transaction's writes and its checkpoint
// to the Base together, once the transaction's appends have succeeded (and
// the previous commit's writes are applied), while the next transaction
// begins.
//
// ReadState reads the whole state from other goroutines, the overlays of
// the commits not yet handed to the Base over it, without holding off
// commits, as a shard forking from this one's state does.
//
// ReadCommitted reads the Base from other goroutines, as queries do,
// holding off the next write to it meanwhile, so that its readers see one
// commit: a read of what a commit not yet durable wrote waits until it is,
// without holding off commits, and is made again.
//
// Package store/rocks keeps its Base in RocksDB, recorded into a recovery
// log; package store/mem keeps it in memory.
package txnkv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"go.gazette.dev/core/broker/client"
	pc "go.gazette.dev/core/consumer/protocol"
)

// ReservedPrefix begins the keys a Store keeps for itself. Keys written
// through its KV may not begin with it, and its scans skip them; generated
// tables prefix their keys with an encoding of the table name, which never
// begins with it.
const ReservedPrefix = 0x00

// CheckpointKey is the key under which a Base keeps the marshaled
// pc.Checkpoint of its last commit.
const CheckpointKey = "\x00checkpoint"

// Base holds what a Store's commits wrote. Get, Scan and Checkpoint are
// called from the Store's goroutine, Write from a goroutine of the commit,
// possibly while the Store's goroutine reads: until the Store calls Settled
// with the commit's writes, it shadows the keys they wrote with their values,
// so that reads of them never depend on whether Write has applied them yet.
type Base interface {
	// Get returns the committed value of key, and whether it exists. The
	// value is valid until the next call on the Base, and must not be
	// modified.
	Get(key []byte) (value []byte, found bool, err error)
	// Scan calls fn with each committed key and value in [start, end), in
	// increasing key order, until fn returns false. A nil end means no
	// upper bound. The slices passed to fn are valid until it returns.
	Scan(start, end []byte, fn func(key, value []byte) bool) error
	// Checkpoint returns the marshaled checkpoint of the last commit Write
	// applied, or nil if there was none.
	Checkpoint() ([]byte, error)
	// Write applies the writes of w, in one atomic batch with checkpoint
	// stored under CheckpointKey. The keys and values of w's entries are
	// never modified; they share w's slabs of bytes, so that a Base which
	// keeps them copies them. It returns once reads of the Base see the
	// batch, with a future which resolves once the batch is durable.
	Write(w *Overlay, checkpoint []byte) (durable client.OpFuture, err error)
	// Settled tells the Base that reads no longer consult w, which Write
	// applied, and will consult the Base for its keys from now on.
	Settled(w *Overlay)
	// Shared returns a reader of what the Base holds for one goroutine
	// other than the Store's, for ReadCommitted: its reads may run
	// concurrently with those of the Store's goroutine and with Settled;
	// its Gets, as the Store's, with Write (of keys Write does not write),
	// but its Scans never. It is not used once the Store is destroyed.
	Shared() runtime.Reader
}

// HashedBase is a Base whose Gets are given the hash of the key (HashKey)
// that the Store computed to look the key up in its overlays, so that the
// Base, finding keys by the same hash, needn't hash them again, as
// store/rocks' row cache does.
type HashedBase interface {
	Base
	// GetHashed is Get of key, whose hash is h.
	GetHashed(key []byte, h uint64) (value []byte, found bool, err error)
}

// PrefetchBase is a Base which reads the committed values of many keys in
// one batch and keeps them at hand for their Gets, as store/rocks does
// (RocksDB's MultiGet into its row cache).
type PrefetchBase interface {
	Base
	// Prefetch reads ahead the committed values of keys, whose hashes are
	// hashes (HashKey), and keeps them for their Gets. It returns how many
	// keys it read from where it keeps what was committed: those it had
	// at hand already are not counted. The slices of keys are valid until
	// it returns. Keys may be of writes of a commit not yet Settled, which
	// Write may be applying meanwhile: the Store's overlays shadow what it
	// keeps of them, until Settled gives it their values.
	Prefetch(keys [][]byte, hashes []uint64) (read int, err error)
}

// Prefetches that find almost everything at hand back off: a Store whose
// Prefetch of a batch of keys reads fewer than one key in prefetchUseful
// from its Base skips the next prefetchBackoff batches (the keys of a small
// key space all stay in the Base's cache, and a prefetch of them would only
// look each key up one more time).
const (
	prefetchUseful  = 16
	prefetchBackoff = 15
)

// ErrClosed is returned by ReadCommitted once the store is destroyed.
var ErrClosed = errors.New("store closed")

// Store is the transactional key/value view of a Base: a runtime.KV of the
// current transaction, and a runtime.Store committing it, whose reads of
// what it committed from other goroutines are a runtime.CommittedReader.
// The stores of packages store/rocks and store/mem embed it. Its methods
// are called from one goroutine (the shard's), but for ReadCommitted;
// commits complete in the background.
type Store struct {
	name    string
	base    Base
	txn     *Overlay // Writes of the current transaction.
	pending *commit  // Commit in flight, if any.
	// prior is the commit in flight before pending, not yet settled, if
	// pending started before prior's writes were applied.
	prior   *commit
	closing chan struct{}  // Closed by Destroy.
	commits sync.WaitGroup // Background commits.

	// shared is held by ReadCommitted, and exclusively to hand a commit to
	// the Base and by Destroy.
	shared  sync.RWMutex
	staged  []*commit // Started, and not yet handed to the Base, oldest first.
	written []*commit // Handed to the Base, and perhaps not yet durable.
	closed  bool      // Set by Destroy, holding shared and reading.
	// reading is held by ReadState's reads of the Base, which don't hold
	// off commits, and exclusively by Destroy.
	reading sync.RWMutex

	forkKey []byte // Set by ForkAtCommit; cleared by StartCommit.

	hashed     HashedBase   // The Base, if it is one.
	prefetcher PrefetchBase // The Base, if it is one.
	pfKeys     [][]byte     // Keys of a Prefetch to read from the Base.
	pfHashes   []uint64     // Their hashes.
	pfSkip     int          // Prefetches to skip: see prefetchUseful.
}

// commit is a transaction's writes on their way to the Base.
type commit struct {
	writes     *Overlay
	checkpoint []byte        // Marshaled checkpoint, written with writes.
	done       chan struct{} // Closed once writes are applied, or the commit failed.
	err        error         // Set before done closes.
	// durable is closed once the Base holds the writes durably, or the
	// commit failed with durableErr, set before.
	durable    chan struct{}
	durableErr error
	// refs counts the holders of writes, which is released once none is
	// left: the store until it settles the commit, the store's written
	// list while it's in it, and ReadState's reads of it while staged.
	refs atomic.Int32
}

// unref drops a hold of c's writes, releasing them if it was the last.
func (c *commit) unref() {
	if c.refs.Add(-1) == 0 {
		c.writes.Release()
	}
}

var (
	_ runtime.KV              = (*Store)(nil)
	_ runtime.Store           = (*Store)(nil)
	_ runtime.CommittedReader = (*Store)(nil)
	_ runtime.TxnSizer        = (*Store)(nil)
)

// New returns a Store of base, which names the store in errors as name.
func New(name string, base Base) *Store {
	var s = &Store{name: name, base: base, txn: NewOverlay(), closing: make(chan struct{})}
	s.hashed, _ = base.(HashedBase)
	s.prefetcher, _ = base.(PrefetchBase)
	return s
}

// RestoreCheckpoint returns the checkpoint of the last commit the Base
// applied, or a zero-valued one if there was none.
func (s *Store) RestoreCheckpoint(runtime.Shard) (pc.Checkpoint, error) {
	return readCheckpoint(s.name, s.base)
}

// StartCommit starts the commit of the current transaction's writes with
// cp: once every future of waitFor has succeeded, the writes and cp are
// written to the Base in one batch, and the returned future resolves once
// the Base holds them durably. If a future of waitFor fails, the writes are
// never written and the Base stays at the previous checkpoint. The next
// transaction starts at once, and reads see the committing one's writes. A
// commit may start before the previous one is applied (a runtime's pipeline
// starts a commit once the previous one has resolved, but for a transaction
// that hurries): it's applied after it, and fails if it fails. If two are
// in flight, StartCommit first waits until the Base applied the first.
func (s *Store) StartCommit(_ runtime.Shard, cp pc.Checkpoint, waitFor client.OpFutures) client.OpFuture {
	if s.prior != nil {
		select {
		case <-s.prior.done:
		case <-s.closing:
		}
	}
	select {
	case <-s.closing:
		return client.FinishedOperation(fmt.Errorf("store %s: destroyed", s.name))
	default:
	}
	if err := s.settle(); err != nil {
		return client.FinishedOperation(err)
	}
	var b, err = cp.Marshal()
	if err != nil {
		return client.FinishedOperation(fmt.Errorf("store %s: encoding checkpoint: %w", s.name, err))
	}
	if s.forkKey != nil {
		s.txn.Put(s.forkKey, b)
		s.forkKey = nil
	}
	s.txn.Freeze() // Read concurrently from here.
	var c = &commit{writes: s.txn, checkpoint: b, done: make(chan struct{}), durable: make(chan struct{})}
	c.refs.Store(1)
	var prior = s.pending // Not yet applied, if settle left it.
	s.txn, s.pending, s.prior = NewOverlay(), c, prior
	s.shared.Lock()
	s.staged = append(s.staged, c)
	s.shared.Unlock()

	var op = client.NewAsyncOperation()
	s.commits.Go(func() { op.Resolve(s.commit(c, waitFor, prior)) })
	return op
}

// TxnSize returns the bytes of keys and values the open transaction wrote,
// and how many keys (runtime.TxnSizer).
func (s *Store) TxnSize() (bytes, writes int) { return s.txn.Bytes(), s.txn.Len() }

// ForkAtCommit asks the next StartCommit to write its checkpoint under key
// too, beside the writes of its transaction: a copy which later commits
// leave as it is. A shard whose state is split between new shards marks so
// the checkpoint from which they go on (see runtime.Adapter's rescaling).
func (s *Store) ForkAtCommit(key []byte) { s.forkKey = bytes.Clone(key) }

// commit writes c once waitFor is done, and prior (if not nil) applied, and
// waits for it to be durable.
func (s *Store) commit(c *commit, waitFor client.OpFutures, prior *commit) (err error) {
	defer func() {
		c.durableErr = err
		close(c.durable)
	}()
	var began = time.Now()
	var durable client.OpFuture
	var ready time.Time // Its appends done, and prior applied.
	durable, c.err = s.write(c, waitFor, prior, &ready)
	close(c.done)
	if c.err != nil {
		return fmt.Errorf("store %s: commit: %w", s.name, c.err)
	}
	var applied = time.Now()
	select {
	case <-durable.Done():
	case <-s.closing:
		return fmt.Errorf("store %s: commit: store destroyed", s.name)
	}
	if slog.Default().Enabled(context.Background(), slog.LevelDebug) {
		slog.Debug("store committed", "store", s.name, "appends", ready.Sub(began),
			"write", applied.Sub(ready), "durable", time.Since(applied), "writes", c.writes.Len(), "bytes", c.writes.Bytes())
	}
	if err := durable.Err(); err != nil {
		return fmt.Errorf("store %s: commit: %w", s.name, err)
	}
	return nil
}

// write hands c to the Base once every future of waitFor has succeeded,
// and prior (if not nil) is applied. It sets *ready to when both were.
func (s *Store) write(c *commit, waitFor client.OpFutures, prior *commit, ready *time.Time) (client.OpFuture, error) {
	// Readers of the Base see c's writes in the Base, once it returns, or
	// not at all if it fails: until then, in its overlay (see ReadState).
	defer func() {
		s.shared.Lock()
		s.staged = slices.DeleteFunc(s.staged, func(o *commit) bool { return o == c })
		s.shared.Unlock()
	}()
	var errDestroyed = errors.New("store destroyed")
	for f := range waitFor {
		select {
		case <-f.Done():
		case <-s.closing:
			return nil, errDestroyed
		}
		if err := f.Err(); err != nil {
			return nil, fmt.Errorf("waiting for the transaction's appends: %w", err)
		}
	}
	if prior != nil {
		select {
		case <-prior.done:
		case <-s.closing:
			return nil, errDestroyed
		}
		if prior.err != nil {
			return nil, fmt.Errorf("the previous commit failed: %w", prior.err)
		}
	}
	*ready = time.Now()
	select {
	case <-s.closing:
		return nil, errDestroyed // Abandoned: don't write.
	default:
	}
	// Readers of the Base from other goroutines see it from now on only
	// once c is durable, and never if it fails.
	s.shared.Lock()
	s.written = slices.DeleteFunc(s.written, func(w *commit) bool {
		select {
		case <-w.durable:
			if w.durableErr != nil {
				return false // A failure stays, failing reads.
			}
			w.unref()
			return true
		default:
			return false
		}
	})
	c.refs.Add(1)
	s.written = append(s.written, c)
	s.shared.Unlock()
	return s.base.Write(c.writes, c.checkpoint)
}

// ReadCommitted calls fn with a view of what the store's commits made
// durable (see runtime.CommittedReader). No commit is handed to the Base
// while fn runs. A read of fn that meets a commit handed to the Base before
// but not yet known durable (a Get of a key it wrote, or any Scan) ends
// fn's run with an error: ReadCommitted then waits until that commit is
// durable, without holding off the next, and calls fn again. A read never
// sees a write that a failed commit would undo. It fails if a commit
// failed, or the store is destroyed. It may be called from any goroutine,
// concurrently with every method of the store.
func (s *Store) ReadCommitted(ctx context.Context, fn func(runtime.Reader) error) error {
	return s.untilRead(ctx, func() (*commit, error) { return s.readCommitted(fn) })
}

// ReadState calls fn with a view of the store's whole state, the reserved
// keys too (runtime.StateReader): the writes of every commit started, as
// StartCommit returned, durable or not, over the Base (those not yet handed
// to it from their overlays). Once fn returns, it waits until the commit
// which wrote key settled, if one not yet durable did (started, or handed
// to the Base), and the commits started before it are durable, and fails
// if one failed: what fn read of them is the caller's only then. (With
// settled nil, it waits for every commit started but not yet handed to
// the Base as fn began.)
// fn's reads don't hold off commits: the Base applies them as fn runs, and
// fn's reads may see some of a later commit's writes and not others, and a
// row being written as it's read half-written (RocksDB updates rows in
// place): fn may rely only on rows no commit started after fn began
// writes. A shard forked from this one by a rescale reads it so: settled
// is the key of its split's checkpoint (fn sees all of the split's commit
// or nothing of it), and what it keeps is no longer written. It fails if a
// commit failed, or the store is destroyed, which waits for fn. It may be
// called from any goroutine, concurrently with every method of the store.
func (s *Store) ReadState(ctx context.Context, settled []byte, fn func(runtime.Reader) error) error {
	var durable, err = s.ReadWritten(ctx, settled, fn)
	if err != nil {
		return err
	}
	return durable(ctx)
}

// ReadWritten is ReadState, but returns once the commits ReadState would
// wait for are written to the Base, durable or not, with durable, which
// waits for them to be durable and fails if one failed
// (runtime.WrittenStateReader). Unless ReadWritten fails, the caller calls
// durable once, which drops the holds of their writes.
func (s *Store) ReadWritten(ctx context.Context, settled []byte, fn func(runtime.Reader) error) (durable func(context.Context) error, err error) {
	var settling []*commit
	settling, err = s.readState(fn, settled)
	for _, c := range settling {
		if err == nil {
			err = s.awaitWritten(ctx, c)
		}
	}
	if err != nil {
		for _, c := range settling {
			c.unref()
		}
		return nil, err
	}
	return func(ctx context.Context) error {
		var err error
		for _, c := range settling {
			if err == nil {
				err = s.awaitDurable(ctx, c)
			}
			c.unref()
		}
		return err
	}, nil
}

// untilRead calls read until it returns no commit to wait for, waiting
// after each call for the commit it returned to be durable.
func (s *Store) untilRead(ctx context.Context, read func() (*commit, error)) error {
	for {
		var blocked, err = read()
		if blocked == nil {
			return err
		} else if err = s.awaitDurable(ctx, blocked); err != nil {
			return err
		}
	}
}

// readState runs fn once, over the commits staged as it began and the
// Base, and then returns those of them that are not yet durable (if
// settled is not nil, only the last which wrote it and those before it),
// and the commit handed to the Base but not yet durable which wrote
// settled (before fn returned: perhaps as it ran), each with a hold of its
// writes the caller drops.
func (s *Store) readState(fn func(runtime.Reader) error, settled []byte) ([]*commit, error) {
	s.shared.RLock()
	var staged = slices.Clone(s.staged)
	for _, c := range staged {
		c.refs.Add(1) // Its writes are read: they're released once fn is done.
	}
	var err = s.failed()
	s.shared.RUnlock()

	if err == nil {
		err = s.read(func(r runtime.Reader) error { return fn(&stateView{r: r, staged: staged}) })
	}
	if settled != nil {
		// Commits started after the last which wrote settled need not be
		// durable: fn relies on none of their rows. If none wrote it, none.
		var last = -1
		for i, c := range staged {
			if _, ok := c.writes.Get(settled); ok {
				last = i
			}
		}
		for _, c := range staged[last+1:] {
			c.unref()
		}
		staged = staged[:last+1]
	}
	var c *commit
	if err == nil {
		c, err = s.settling(settled)
	}
	if c != nil {
		staged = append(staged, c)
	}
	if err != nil {
		for _, c := range staged {
			c.unref()
		}
		return nil, err
	}
	return staged, nil
}

// read runs fn on a reader of the Base, unless the store is closed.
func (s *Store) read(fn func(runtime.Reader) error) error {
	s.reading.RLock()
	defer s.reading.RUnlock()
	if s.closed {
		return fmt.Errorf("store %s: %w", s.name, ErrClosed)
	}
	return fn(s.base.Shared())
}

// settling returns the commit handed to the Base but not yet durable which
// wrote key, if one did, with a hold of its writes the caller drops, or the
// error of a failed commit or of the store's close.
func (s *Store) settling(key []byte) (*commit, error) {
	s.shared.RLock()
	defer s.shared.RUnlock()
	if err := s.failed(); err != nil {
		return nil, err
	}
	for _, c := range s.written {
		if _, ok := c.writes.Get(key); ok && !durable(c) {
			c.refs.Add(1)
			return c, nil
		}
	}
	return nil, nil
}

// awaitWritten waits until c is written to the Base, and returns its error
// if it failed to be.
func (s *Store) awaitWritten(ctx context.Context, c *commit) error {
	return s.await(ctx, c.done, func() error { return c.err })
}

// awaitDurable waits until c is durable, and returns its error if it
// failed.
func (s *Store) awaitDurable(ctx context.Context, c *commit) error {
	return s.await(ctx, c.durable, func() error { return c.durableErr })
}

// await waits until done is closed, and then returns the commit's error
// that failed returns, if any.
func (s *Store) await(ctx context.Context, done <-chan struct{}, failed func() error) error {
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.closing:
		return fmt.Errorf("store %s: %w", s.name, ErrClosed)
	}
	if err := failed(); err != nil {
		return fmt.Errorf("store %s: a commit failed: %w", s.name, err)
	}
	return nil
}

// failed returns an error if the store is closed, or a commit it handed to
// the Base failed. The caller holds s.shared.
func (s *Store) failed() error {
	if s.closed {
		return fmt.Errorf("store %s: %w", s.name, ErrClosed)
	}
	for _, c := range s.written {
		if durable(c) && c.durableErr != nil {
			return fmt.Errorf("store %s: a commit failed: %w", s.name, c.durableErr)
		}
	}
	return nil
}

// readCommitted runs fn once, holding off commits. It returns the commit
// not yet durable that a read of fn met, if one did.
func (s *Store) readCommitted(fn func(runtime.Reader) error) (*commit, error) {
	s.shared.RLock()
	defer s.shared.RUnlock()
	if err := s.failed(); err != nil {
		return nil, err
	}
	var v = &committedView{r: s.base.Shared(), written: s.written}
	var err = fn(v)
	if v.blocked != nil {
		return v.blocked, nil
	}
	return nil, err
}

// durable reports whether c's durability is known.
func durable(c *commit) bool {
	select {
	case <-c.durable:
		return true
	default:
		return false
	}
}

// errNotDurable ends a read of a committedView that met a commit not yet
// known durable.
var errNotDurable = errors.New("a commit read is not yet durable")

// committedView is a Base's shared reader, within ReadCommitted, but for
// the reserved keys.
type committedView struct {
	r       runtime.Reader
	written []*commit // Handed to the Base before the view, maybe not durable.
	blocked *commit   // Not yet durable, met by a read.
}

// Get returns the committed value of key, which may not be reserved, unless
// a commit not yet durable wrote it.
func (v *committedView) Get(key []byte) ([]byte, bool, error) {
	if reserved(key) {
		return nil, false, fmt.Errorf("get: key %q has the reserved prefix", key)
	} else if v.blocked != nil {
		return nil, false, errNotDurable
	}
	for _, c := range v.written {
		// A frozen overlay's map is only read from here on.
		if _, ok := c.writes.Get(key); ok && !durable(c) {
			v.blocked = c
			return nil, false, errNotDurable
		}
	}
	return v.r.Get(key)
}

// Scan calls fn with the committed keys and values of [start, end), but
// the reserved ones, unless a commit handed to the Base, not yet durable,
// wrote within them.
func (v *committedView) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	if v.blocked != nil {
		return errNotDurable
	}
	start = unreserved(start)
	for _, c := range v.written {
		if durable(c) {
			continue
		}
		// A frozen overlay is only read from here on.
		var wrote bool
		c.writes.Ascend(start, end, func(Entry) bool { wrote = true; return false })
		if wrote {
			v.blocked = c
			return errNotDurable
		}
	}
	return v.r.Scan(start, end, fn)
}

// settle releases the writes of the commits in flight once they're
// applied, the prior first, and returns the error of one that failed: a
// failed commit fails every later read.
func (s *Store) settle() error {
	if s.prior != nil {
		if ok, err := s.settled(s.prior); !ok {
			return err
		}
		s.prior = nil
	}
	if s.pending == nil {
		return nil
	} else if ok, err := s.settled(s.pending); !ok {
		return err
	}
	s.pending = nil
	return nil
}

// settled hands c's writes to the Base as settled, and reports true, if c
// is applied; it returns c's error if it failed.
func (s *Store) settled(c *commit) (bool, error) {
	if !isDone(c) {
		return false, nil
	} else if c.err != nil {
		return false, fmt.Errorf("store %s: a commit failed: %w", s.name, c.err)
	}
	s.base.Settled(c.writes)
	c.unref()
	return true, nil
}

// isDone reports whether c's writes are applied, or it failed.
func isDone(c *commit) bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// Get returns the value of key within the current transaction. The value
// is valid until the next call on the store, and must not be modified.
func (s *Store) Get(key []byte) ([]byte, bool, error) {
	if err := s.settle(); err != nil {
		return nil, false, err
	}
	var h = HashKey(key)
	if e, ok := s.txn.FindForWrite(key, h); ok {
		return e.Value, !e.Deleted, nil
	} else if s.pending != nil {
		// A commit still in flight, whose writes may or may not be in the
		// Base yet: they're the same in either place.
		if e, ok = s.pending.writes.GetHashed(key, h); ok {
			return e.Value, !e.Deleted, nil
		} else if s.prior != nil {
			if e, ok = s.prior.writes.GetHashed(key, h); ok {
				return e.Value, !e.Deleted, nil
			}
		}
	}
	var v []byte
	var ok bool
	var err error
	if s.hashed != nil {
		v, ok, err = s.hashed.GetHashed(key, h)
	} else {
		v, ok, err = s.base.Get(key)
	}
	if err != nil {
		return nil, false, fmt.Errorf("store %s: get: %w", s.name, err)
	}
	return v, ok, nil
}

var _ runtime.KVPrefetcher = (*Store)(nil)

// Prefetching reports whether the Store reads ahead the next batch of
// keys: not if its Base is no PrefetchBase, nor while it backs off (see
// prefetchUseful), counting the batch it passes on.
func (s *Store) Prefetching() bool {
	if s.prefetcher == nil {
		return false
	} else if s.pfSkip > 0 {
		s.pfSkip--
		return false
	}
	return true
}

// Prefetch reads ahead the committed values of the keys, if the Base is a
// PrefetchBase, so that their Gets find them at hand. Prefetches of keys
// which the Base almost all had at hand back off (see prefetchUseful and
// Prefetching).
//
// It doesn't look the keys up in the overlays of the current transaction
// and of a commit in flight first, as Get does: what it reads of a key they
// wrote is never read, as they shadow it, until their commits settle and
// give the Base the key's value (a Get would look each key up in them
// again, and most keys a Get misses in its overlays, the Base has at hand
// too: those it wrote after reading them).
func (s *Store) Prefetch(keys *runtime.Prefetch) error {
	if s.prefetcher == nil || keys.Len() == 0 {
		return nil
	}
	if err := s.settle(); err != nil {
		return err
	}
	s.pfKeys, s.pfHashes = s.pfKeys[:0], s.pfHashes[:0]
	for i := range keys.Len() {
		var key = keys.Key(i)
		s.pfKeys, s.pfHashes = append(s.pfKeys, key), append(s.pfHashes, HashKey(key))
	}
	var read, err = s.prefetcher.Prefetch(s.pfKeys, s.pfHashes)
	clear(s.pfKeys)
	if err != nil {
		return fmt.Errorf("store %s: prefetch: %w", s.name, err)
	}
	if read*prefetchUseful < keys.Len() {
		s.pfSkip = prefetchBackoff
	}
	return nil
}

// Put sets key to value within the current transaction.
func (s *Store) Put(key, value []byte) error {
	if reserved(key) {
		return fmt.Errorf("store %s: put: key %q has the reserved prefix", s.name, key)
	} else if len(key) > math.MaxUint32 || len(value) > math.MaxUint32 {
		return fmt.Errorf("store %s: put: key of %d bytes or value of %d bytes is too large", s.name, len(key), len(value))
	}
	s.txn.Put(key, value)
	return nil
}

// Delete removes key within the current transaction.
func (s *Store) Delete(key []byte) error {
	if reserved(key) {
		return fmt.Errorf("store %s: delete: key %q has the reserved prefix", s.name, key)
	}
	s.txn.Delete(key)
	return nil
}

// Scan calls fn with each key and value in [start, end) in order, as of the
// current transaction, until fn returns false. A nil end means no upper
// bound. Keys with the reserved prefix are skipped.
func (s *Store) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	if err := s.settle(); err != nil {
		return err
	}
	start = unreserved(start)
	var writes = s.writesIn(start, end)
	if err := scanOver(s.base, writes, start, end, fn); err != nil {
		return fmt.Errorf("store %s: scan: %w", s.name, err)
	}
	return nil
}

// scanOver calls fn with each key and value in [start, end) of base, with
// writes (in key order, as writesOf returns them) merged over it, until fn
// returns false.
func scanOver(base runtime.Reader, writes []Entry, start, end []byte, fn func(key, value []byte) bool) error {
	var more = true
	var emit = func(e Entry) {
		if !e.Deleted {
			more = fn(e.Key, e.Value)
		}
	}
	var err = base.Scan(start, end, func(key, value []byte) bool {
		for more && len(writes) != 0 && bytes.Compare(writes[0].Key, key) < 0 {
			emit(writes[0])
			writes = writes[1:]
		}
		if !more {
			return false
		}
		if len(writes) != 0 && bytes.Equal(writes[0].Key, key) {
			emit(writes[0])
			writes = writes[1:]
		} else {
			more = fn(key, value)
		}
		return more
	})
	if err != nil {
		return err
	}
	for more && len(writes) != 0 {
		emit(writes[0])
		writes = writes[1:]
	}
	return nil
}

// writesIn returns the writes within [start, end) of the current
// transaction and of the commits still in flight, in key order. Where
// several wrote a key, the latest write is returned.
func (s *Store) writesIn(start, end []byte) []Entry {
	switch {
	case s.pending == nil:
		return writesOf(start, end, s.txn)
	case s.prior == nil:
		return writesOf(start, end, s.pending.writes, s.txn)
	default:
		return writesOf(start, end, s.prior.writes, s.pending.writes, s.txn)
	}
}

// writesOf returns the entries within [start, end) of overlays, in key
// order: where several wrote a key, that of the last of them.
func writesOf(start, end []byte, overlays ...*Overlay) []Entry {
	var out []Entry
	for _, o := range overlays {
		var older = out
		out = make([]Entry, 0, len(older))
		o.Ascend(start, end, func(e Entry) bool {
			for len(older) != 0 && bytes.Compare(older[0].Key, e.Key) < 0 {
				out, older = append(out, older[0]), older[1:]
			}
			if len(older) != 0 && bytes.Equal(older[0].Key, e.Key) {
				older = older[1:]
			}
			out = append(out, e)
			return true
		})
		out = append(out, older...)
	}
	return out
}

// stateView reads the writes of staged commits, not yet handed to the Base
// (perhaps being handed to it as it reads), over a reader of the Base.
type stateView struct {
	r      runtime.Reader
	staged []*commit // Oldest first; frozen overlays, read concurrently.
}

// Get returns the value of key as the last staged commit that wrote it
// left it, or else the Base.
func (v *stateView) Get(key []byte) ([]byte, bool, error) {
	for i := len(v.staged) - 1; i >= 0; i-- {
		if e, ok := v.staged[i].writes.Get(key); ok {
			return e.Value, !e.Deleted, nil
		}
	}
	return v.r.Get(key)
}

// Scan calls fn with the keys and values of [start, end), of the staged
// commits over the Base, until fn returns false.
func (v *stateView) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	if len(v.staged) == 0 {
		return v.r.Scan(start, end, fn)
	}
	var overlays = make([]*Overlay, len(v.staged))
	for i, c := range v.staged {
		overlays[i] = c.writes
	}
	return scanOver(v.r, writesOf(start, end, overlays...), start, end, fn)
}

// Destroy abandons the current transaction and a commit still waiting for
// its appends, waits for a commit being written, and releases the store's
// overlays: the Base keeps what was committed. A ReadCommitted waiting for a
// commit fails, and Destroy waits for those reading. The Base is not used
// once Destroy returns, and the store is not used once Destroy is called.
func (s *Store) Destroy() {
	close(s.closing)
	s.reading.Lock() // Wait out the readers of the Base.
	s.shared.Lock()
	s.closed = true
	s.shared.Unlock()
	s.reading.Unlock()
	s.commits.Wait()
	for _, c := range []*commit{s.prior, s.pending} {
		if c != nil {
			c.unref()
		}
	}
	s.prior, s.pending = nil, nil
	s.txn.Release()
}

var _ runtime.Savepointer = (*Store)(nil)

// Savepoint sets the savepoint of the current transaction where its writes
// are now (see Overlay.Savepoint).
func (s *Store) Savepoint() { s.txn.Savepoint() }

// RollbackToSavepoint undoes the writes of the current transaction made
// since its savepoint.
func (s *Store) RollbackToSavepoint() { s.txn.RollbackToSavepoint() }

// ReleaseSavepoint ends the savepoint of the current transaction, keeping
// its writes.
func (s *Store) ReleaseSavepoint() { s.txn.ReleaseSavepoint() }
