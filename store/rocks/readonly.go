package rocks

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/linxGnu/grocksdb"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

// ErrReadOnly is returned by writes to a ReadOnly store.
var ErrReadOnly = errors.New("the store is open read-only")

// ReadOnly is a store's database opened read-only, for inspection: typically
// a copy played back from its recovery log. It holds what the last commit
// in its files holds, as a primary recovering them would find it, and it
// neither writes its directory nor records anything.
type ReadOnly struct {
	dir  string
	opts *grocksdb.Options
	ro   *grocksdb.ReadOptions
	db   *grocksdb.DB
}

var _ runtime.KV = (*ReadOnly)(nil)

// OpenReadOnly opens the database in dir read-only, replaying its
// write-ahead log in memory.
func OpenReadOnly(dir string) (*ReadOnly, error) {
	var r = &ReadOnly{dir: dir, opts: grocksdb.NewDefaultOptions(), ro: grocksdb.NewDefaultReadOptions()}
	r.opts.SetInfoLogLevel(grocksdb.WarnInfoLogLevel)
	var err error
	if r.db, err = grocksdb.OpenDbForReadOnly(r.opts, dir, false); err != nil {
		r.Close()
		return nil, fmt.Errorf("opening store %s read-only: %w", dir, err)
	}
	return r, nil
}

// PlayReadOnly plays recovery log into dir, which must be empty, from
// hints (nil plays the whole log) through the log's current write head, and
// opens the result read-only. Unlike a primary taking over, it does not
// fence the log: the log's writer goes on undisturbed. The store holds the
// last commit the log held, as of its checkpoint.
func PlayReadOnly(ctx context.Context, jc pb.RoutedJournalClient, log pb.Journal, hints *recoverylog.Hints, dir string) (*ReadOnly, error) {
	var playCtx, stop = context.WithCancel(ctx)
	defer stop()
	// The player's author is never written: it fences only if asked to finish.
	var player = recoverylog.NewPlayer(jc, log, dir, readOnlyAuthor)
	var done = make(chan error, 1)
	go func() {
		var _, err = player.Play(playCtx, hints)
		done <- err
	}()
	var err error
	select {
	case <-player.Tailing():
		stop() // Caught up with the write head: stop before appending anything.
		if err = <-done; errors.Is(err, context.Canceled) && ctx.Err() == nil {
			err = nil
		}
	case err = <-done:
		if err == nil {
			err = errors.New("playback ended early")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("playing recovery log %s into %s: %w", log, dir, err)
	}
	return OpenReadOnly(dir)
}

// readOnlyAuthor is the author of the players of PlayReadOnly.
const readOnlyAuthor recoverylog.Author = 0x5ead0417

// KV returns r, whose writes fail with ErrReadOnly.
func (r *ReadOnly) KV() runtime.KV { return r }

// Checkpoint returns the checkpoint committed with the store's state: the
// offsets through which its sources had been read.
func (r *ReadOnly) Checkpoint() (pc.Checkpoint, error) {
	var cp pc.Checkpoint
	var v, err = r.db.GetBytes(r.ro, checkpointKey)
	if err != nil {
		return cp, fmt.Errorf("store %s: reading checkpoint: %w", r.dir, err)
	} else if v != nil {
		if err = cp.Unmarshal(v); err != nil {
			return cp, fmt.Errorf("store %s: decoding checkpoint: %w", r.dir, err)
		}
	}
	return cp, nil
}

// Get returns the value of key.
func (r *ReadOnly) Get(key []byte) ([]byte, bool, error) {
	var v, err = r.db.GetBytes(r.ro, key)
	if err != nil {
		return nil, false, fmt.Errorf("store %s: get: %w", r.dir, err)
	}
	return v, v != nil, nil
}

// Put fails with ErrReadOnly.
func (r *ReadOnly) Put(key, _ []byte) error {
	return fmt.Errorf("store %s: put %q: %w", r.dir, key, ErrReadOnly)
}

// Delete fails with ErrReadOnly.
func (r *ReadOnly) Delete(key []byte) error {
	return fmt.Errorf("store %s: delete %q: %w", r.dir, key, ErrReadOnly)
}

// Scan calls fn with each key and value in [start, end) in order. Keys with
// the reserved prefix are skipped.
func (r *ReadOnly) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	if len(start) == 0 || start[0] == ReservedPrefix {
		start = []byte{ReservedPrefix + 1}
	}
	var it = r.db.NewIterator(r.ro)
	defer it.Close()
	for it.Seek(start); it.Valid(); it.Next() {
		var k = it.Key().Data()
		if end != nil && bytes.Compare(k, end) >= 0 {
			break
		} else if !fn(k, it.Value().Data()) {
			break
		}
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("store %s: scan: %w", r.dir, err)
	}
	return nil
}

// Close closes the database.
func (r *ReadOnly) Close() {
	if r.db != nil {
		r.db.Close()
		r.db = nil
	}
	r.ro.Destroy()
	r.opts.Destroy()
}
