package runtime

import (
	"bytes"
	"fmt"
	"time"

	"go.gazette.dev/core/message"

	"github.com/gazconsumer/gazconsumer/runtime/due"
)

// TimedKV is the KV of a transaction which tells its time: that of the
// shard's clock as the transaction began (or as it fired what fell due
// before finalizing). The tables of a consumer with tables that expire
// (a `ttl`) are views of one, which dates each write of their rows.
type TimedKV interface {
	KV
	// Now returns the transaction's time.
	Now() time.Time
}

// Timekeeper is implemented by an Application whose store holds what falls
// due at a time (as an Adapter of a consumer with tables that expire does):
// a transaction pipeline has it fire, within a transaction, what is due by
// its clock's time (processing time), as the transaction begins and again
// before it finalizes (unless its shard hurries to split: the next
// transaction, begun at once, fires it), and begins a transaction when
// something falls due while none is running.
type Timekeeper interface {
	// Due returns the earliest time something of the store falls due, and
	// whether anything does.
	Due(Shard, Store) (time.Time, bool, error)
	// Fire sets the time of the store's current transaction to now, and
	// fires within it what is due by now (what was due as it was called: a
	// firing that sets something due by now has it fire in the next
	// transaction). If the store is a TxnSizer, it stops, having fired at
	// least one, once the transaction reached bound: what it leaves is due
	// by now, for the next transaction. It returns how many it fired.
	Fire(_ Shard, _ Store, now time.Time, pub *message.Publisher, bound TxnBound) (int, error)
	// SetTime sets the time of the store's current transaction to now,
	// firing nothing: a transaction that begins as its shard hurries (see
	// txn.Pipeline.Hurry) leaves what is due to its successor.
	SetTime(_ Shard, _ Store, now time.Time, pub *message.Publisher) error
}

// Expiring is a table of a consumer whose rows expire (annotated with a
// `ttl`), and the optional handler told of each row that expires. Package
// runtime/table makes them (table.Expires).
type Expiring[H any, T Txner] struct {
	// Table is the table's name.
	Table string
	// Start and End bound the store keys of the table's rows.
	Start, End []byte
	// Expire is called within the transaction, with the store key and value
	// of each row of the table that expires, once the row is deleted: it may
	// write the row again, which then lives on.
	Expire func(h H, tx T, key, value []byte) error
}

// Timing is a type of per-key timer of a consumer (a message annotated
// `(gazconsumer.v1.message).timer`, among the consumer's `timers`), and the
// handler of its firings. Package runtime/table makes them (table.Fires).
type Timing[H any, T Txner] struct {
	// Name is the timers' name: that of their schema, a table's.
	Name string
	// Start and End bound the store keys of the timers.
	Start, End []byte
	// Fire is called within the transaction, with the store key and value
	// of each timer that fires, once the timer is deleted: it may set the
	// timer of its key again.
	Fire func(h H, tx T, key, value []byte) error
}

// timedKV is the TimedKV of a transaction.
type timedKV struct {
	KV
	tx *Txn
}

// Now returns the time of the transaction.
func (kv *timedKV) Now() time.Time { return kv.tx.now }

// keepsTime reports whether the consumer has anything that falls due.
func (a *Adapter[H, T]) keepsTime() bool { return len(a.c.Expiring) != 0 || len(a.c.Timers) != 0 }

// fired returns the time through which the store's transactions fired
// what fell due (zero, if none did since the adapter opened it): the index
// holds nothing due before it, as what is set due before a transaction's
// time is due at it. Scans of the index begin there, rather than seek past
// the deletions of all that fired before (in RocksDB, tombstones until
// compactions drop them).
func (a *Adapter[H, T]) fired(shard Shard, store Store) time.Time {
	if v, ok := a.firedAt.Load(shard.Spec().Id); ok && v.(firedMark).store == store {
		return v.(firedMark).at
	}
	return time.Time{}
}

// firedMark is the time through which a store fired what fell due. The
// marks are kept by shard id, and hold only the last store of each: that of
// a store a shard no longer uses is of no use.
type firedMark struct {
	store Store
	at    time.Time
}

// Due returns the earliest time something of the store falls due.
func (a *Adapter[H, T]) Due(shard Shard, store Store) (time.Time, bool, error) {
	if a.handingOff(shard, store) {
		return time.Time{}, true, nil // Due at once: a transaction goes on with it.
	}
	var kvs, ok = store.(KVStore)
	if !a.keepsTime() || !ok {
		return time.Time{}, false, nil
	}
	var at time.Time
	var found bool
	var perr error
	if err := kvs.KV().Scan(due.From(a.fired(shard, store)), due.End(), func(key, _ []byte) bool {
		at, _, _, perr = due.ParseKey(key)
		found = perr == nil
		return false
	}); err != nil {
		return at, false, fmt.Errorf("consumer %s: reading what falls due: %w", a.c.Name, err)
	} else if perr != nil {
		return at, false, fmt.Errorf("consumer %s: %w", a.c.Name, perr)
	}
	return at, found, nil
}

// Fire reads the entries of the index in batches, each twice as large as
// the one before, from minFireBatch up to maxFireBatch: each scan of the
// transaction's writes costs about as much, however many it returns, and a
// transaction firing many (tens of thousands, under a backlog) scans them
// a few times rather than once every minFireBatch.
const (
	minFireBatch = 256
	maxFireBatch = 16 << 10
)

// SetTime sets the time of the store's transaction.
func (a *Adapter[H, T]) SetTime(shard Shard, store Store, now time.Time, pub *message.Publisher) error {
	var _, err = a.timed(shard, store, now, pub)
	return err
}

// timed returns the store's transaction, its time set to now.
func (a *Adapter[H, T]) timed(shard Shard, store Store, now time.Time, pub *message.Publisher) (T, error) {
	var tx, err = a.txnOf(shard, store, message.Envelope{}, pub)
	if err == nil {
		tx.txn().now = now
	}
	return tx, err
}

// Fire sets the time of the store's transaction, and expires the rows due
// by now: it calls the handler's OnExpire… method of the row's table, if
// the handler has one, and deletes the row, its expiry record and its entry
// of the index; and fires the timers due by now likewise. Stopped by
// bound, it leaves the rest of what is due by now to the next call.
func (a *Adapter[H, T]) Fire(shard Shard, store Store, now time.Time, pub *message.Publisher, bound TxnBound) (int, error) {
	var tx, err = a.timed(shard, store, now, pub)
	if err != nil {
		return 0, err
	}
	if !a.keepsTime() {
		return 0, nil
	}
	var kv = store.(KVStore).KV()
	var sized, _ = store.(TxnSizer)
	var _, end = due.Through(now)
	var start = due.From(a.fired(shard, store))
	var fired int
	// through is the time before which everything due has fired: now, once
	// everything due by now has; or else the time of the last fired, as
	// others of that time may remain.
	var through = now
	defer func() {
		if err == nil && through.After(a.fired(shard, store)) {
			a.firedAt.Store(shard.Spec().Id, firedMark{store, through})
		}
	}()
	for batch := minFireBatch; ; batch = min(2*batch, maxFireBatch) {
		// Entries are collected, then fired: a scan's callback may not write.
		var keys [][]byte
		if err = kv.Scan(start, end, func(key, _ []byte) bool {
			keys = append(keys, bytes.Clone(key))
			return len(keys) < batch
		}); err != nil {
			return fired, fmt.Errorf("consumer %s: reading what is due: %w", a.c.Name, err)
		}
		for _, key := range keys {
			if owned, oerr := a.ownsDue(shard, store, key); oerr != nil {
				return fired, oerr
			} else if !owned {
				continue // Hidden, for the shard owning it.
			} else if err = a.fire(tx, kv, key); err != nil {
				return fired, err
			}
			fired++
			if bound.Reached(sized) {
				through, _, _, _ = due.ParseKey(key) // Parsed as it fired.
				return fired, nil
			}
		}
		if len(keys) < batch {
			return fired, nil
		}
		start = append(keys[len(keys)-1], 0)
	}
}

// ownsDue reports whether the shard owns the entry key of the index of what
// falls due: it does, unless it's split and keeps, hidden until its rescale
// ends, what it no longer owns, of which the entry is.
func (a *Adapter[H, T]) ownsDue(shard Shard, store Store, key []byte) (bool, error) {
	var g = a.guardOf(shard, store)
	if g == nil || !g.built.hides() {
		return true, nil
	}
	var own = g.built.Owns
	var owner, err = a.ownerOf(key, own.Of, new([]byte))
	if err != nil {
		return false, fmt.Errorf("shard %s: the owner of %x: %w", shard.Spec().Id, key, err)
	}
	return owner == own.Index, nil
}

// fire fires the entry key of the index: a timer's, or a row's expiry.
func (a *Adapter[H, T]) fire(tx T, kv KV, key []byte) error {
	var at, kind, subject, err = due.ParseKey(key)
	if err != nil {
		return fmt.Errorf("consumer %s: %w", a.c.Name, err)
	}
	var what string
	var handle func(h H, tx T, key, value []byte) error
	switch kind {
	case due.Expiry:
		for i := range a.c.Expiring {
			if e := &a.c.Expiring[i]; bytes.Compare(subject, e.Start) >= 0 && bytes.Compare(subject, e.End) < 0 {
				what, handle = "expiring a row of table "+e.Table, e.Expire
			}
		}
	case due.Timer:
		for i := range a.c.Timers {
			if t := &a.c.Timers[i]; bytes.Compare(subject, t.Start) >= 0 && bytes.Compare(subject, t.End) < 0 {
				what, handle = "firing a timer "+t.Name, t.Fire
			}
		}
	}
	if handle == nil {
		return fmt.Errorf("consumer %s: %s %x is due at %v, but the consumer keeps none of it", a.c.Name, kind, subject, at)
	}
	// The entry, the subject's record and the subject go, and then the
	// handler is called: it may set the subject due again.
	var value []byte
	var found bool
	if value, found, err = kv.Get(subject); err == nil {
		value = bytes.Clone(value)
		if err = kv.Delete(key); err == nil {
			if err = kv.Delete(due.AppendExpiryKey(nil, subject)); err == nil {
				err = kv.Delete(subject)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("consumer %s: %s: %w", a.c.Name, what, err)
	} else if !found {
		return nil // Not the shard's since a rescale split its state.
	}
	tx.txn().Envelope = message.Envelope{}
	if err = handle(a.handler, tx, subject, value); err != nil {
		return fmt.Errorf("%s: %s: %w", a.c.Name, what, err)
	}
	return nil
}
