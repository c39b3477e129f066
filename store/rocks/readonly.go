package rocks

import (
	"context"
	"fmt"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"github.com/linxGnu/grocksdb"
	pb "go.gazette.dev/core/broker/protocol"
)

// ReadOnly is a store's database opened read-only, for inspection: typically
// a copy played back from its recovery log. It holds what the last commit
// in its files holds, as a primary recovering them would find it, and it
// neither writes its directory nor records anything. It reads the database
// as a txnkv.ReadOnly view: its writes fail with txnkv.ErrReadOnly.
type ReadOnly struct {
	*txnkv.ReadOnly

	opts *grocksdb.Options
	ro   *grocksdb.ReadOptions
	db   *grocksdb.DB
}

var _ runtime.KV = (*ReadOnly)(nil)

// OpenReadOnly opens the database in dir read-only, replaying its
// write-ahead log in memory.
func OpenReadOnly(dir string) (*ReadOnly, error) {
	var r = &ReadOnly{opts: grocksdb.NewDefaultOptions(), ro: grocksdb.NewDefaultReadOptions()}
	r.opts.SetInfoLogLevel(grocksdb.WarnInfoLogLevel)
	var err error
	if r.db, err = grocksdb.OpenDbForReadOnly(r.opts, dir, false); err != nil {
		r.Close()
		return nil, fmt.Errorf("opening store %s read-only: %w", dir, err)
	}
	var rd = reader{db: r.db, ro: r.ro}
	if rd.cdb, rd.cro, err = cHandles(r.db, r.ro); err != nil {
		r.Close()
		return nil, fmt.Errorf("opening store %s read-only: %w", dir, err)
	}
	r.ReadOnly = txnkv.NewReadOnly(dir, rd)
	return r, nil
}

// PlayReadOnly plays recovery log into dir, which must be empty, from
// hints (nil plays the whole log) through the log's current write head, and
// opens the result read-only. Unlike a primary taking over, it does not
// fence the log: the log's writer goes on undisturbed. The store holds the
// last commit the log held, as of its checkpoint.
func PlayReadOnly(ctx context.Context, jc pb.RoutedJournalClient, log pb.Journal, hints *recoverylog.Hints, dir string) (*ReadOnly, error) {
	// The player's author is never written: it does not fence the log.
	var player = recoverylog.NewPlayer(jc, log, dir, readOnlyAuthor)
	if err := player.PlayToWriteHead(ctx, hints); err != nil {
		return nil, fmt.Errorf("playing recovery log %s into %s: %w", log, dir, err)
	}
	return OpenReadOnly(dir)
}

// readOnlyAuthor is the author of the players of PlayReadOnly.
const readOnlyAuthor recoverylog.Author = 0x5ead0417

// KV returns r, whose writes fail with txnkv.ErrReadOnly.
func (r *ReadOnly) KV() runtime.KV { return r }

// Close closes the database.
func (r *ReadOnly) Close() {
	if r.db != nil {
		r.db.Close()
		r.db = nil
	}
	r.ro.Destroy()
	r.opts.Destroy()
}

// OpenReadOnly opens the database in dir read-only, as OpenReadOnly does:
// a copy of a store's files played from its recovery log, which a shard
// forked from the store's shard reads (runtime.ReadOnlyOpener).
func (Opener) OpenReadOnly(dir string) (runtime.ReadCloser, error) {
	var r, err = OpenReadOnly(dir)
	if err != nil {
		return nil, err
	}
	return r, nil
}

var _ runtime.ReadOnlyOpener = Opener{}
