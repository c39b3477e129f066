package runtime

import (
	"bytes"
	"fmt"
	"sort"
	"sync"

	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/runtime/partition"
)

// A shard split by a rescale keeps what it no longer owns where it was until
// its rescale ends, for the shards forked from it, and hides it: from its
// tables (its transactions' KV), from its queries (OwnedView), and from what
// it fires (ownsDue). So no row is seen by two shards.

// hider tells which of a split shard's store keys it hides: those of its
// tables, timers and index of what falls due (splitRanges) that another
// shard owns.
type hider struct {
	ranges  [][2][]byte // splitRanges: in key order, disjoint.
	own     Ownership
	ownerOf func(stored []byte, of int, buf *[]byte) (int, error)
	buf     []byte
}

// hiderOf returns the hider of a shard owning own.
func (a *Adapter[H, T]) hiderOf(own Ownership) *hider {
	return &hider{ranges: a.splitRanges(), own: own, ownerOf: a.ownerOf}
}

// hides reports whether key is hidden: of a range a split divides, and
// owned by another shard.
func (h *hider) hides(key []byte) (bool, error) {
	var i = sort.Search(len(h.ranges), func(i int) bool { return bytes.Compare(h.ranges[i][0], key) > 0 }) - 1
	if i < 0 || bytes.Compare(key, h.ranges[i][1]) >= 0 {
		return false, nil // Not divided: the shard's own record, or no row.
	}
	var owner, err = h.ownerOf(key, h.own.Of, &h.buf)
	if err != nil {
		return false, fmt.Errorf("the owner of %x: %w", key, err)
	}
	return owner != h.own.Index, nil
}

// ownedReader is a Reader of a split shard's state without what it hides.
type ownedReader struct {
	r Reader
	h *hider
}

// Get returns the value of key, unless it's hidden.
func (o *ownedReader) Get(key []byte) ([]byte, bool, error) {
	if hidden, err := o.h.hides(key); err != nil || hidden {
		return nil, false, err
	}
	return o.r.Get(key)
}

// Scan calls fn with each key of [start, end) not hidden.
func (o *ownedReader) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	var herr error
	var err = o.r.Scan(start, end, func(key, value []byte) bool {
		var hidden bool
		if hidden, herr = o.h.hides(key); herr != nil {
			return false
		}
		return hidden || fn(key, value)
	})
	if err == nil {
		err = herr
	}
	return err
}

// ownedKV is the KV of a transaction of a split shard: it hides, from its
// reads, what the shard no longer owns.
type ownedKV struct {
	KV
	owned ownedReader
}

// Get returns the value of key, unless it's hidden.
func (kv *ownedKV) Get(key []byte) ([]byte, bool, error) { return kv.owned.Get(key) }

// Scan calls fn with each key of [start, end) not hidden.
func (kv *ownedKV) Scan(start, end []byte, fn func(key, value []byte) bool) error {
	return kv.owned.Scan(start, end, fn)
}

// PartitionOwner is implemented by the views OwnedView returns of the state
// of a shard split by a rescale: a query routed to the shard by the
// partitions before the rescale, for a key it no longer owns, is routed
// again rather than answered (it would find no row, which its owner has).
type PartitionOwner interface {
	// OwnsPartitionKey reports whether the shard owns the rows of partition
	// key pk (encoded as the consumer's messages encode theirs).
	OwnsPartitionKey(pk []byte) bool
}

// ownership is a Reader of a split shard's state, which owns own.
type ownership struct {
	Reader
	own Ownership
}

// OwnsPartitionKey reports whether pk maps to the partition owned.
func (o ownership) OwnsPartitionKey(pk []byte) bool {
	return partition.Index(pk, o.own.Of) == o.own.Index
}

// OwnedViewer is implemented by Applications whose shards, split by a
// rescale, keep rows they no longer own until the rescale ends (Adapter is
// one): queries read a shard's committed state through OwnedView.
type OwnedViewer interface {
	// OwnedView returns r, a view of the state of shard id, or, if the
	// shard was split by a rescale, a view of it which is a PartitionOwner
	// and hides what the shard no longer owns, as its state's record says.
	OwnedView(id pc.ShardID, r Reader) (Reader, error)
}

var _ OwnedViewer = (*Adapter[any, *Txn])(nil)

// ownedViews caches, by shard, the record of the partitioning last read by
// OwnedView, and its hider (nil if the record hides nothing): a record
// changes with rescales only.
type ownedViews struct {
	mu   sync.Mutex
	last map[pc.ShardID]ownedViewOf
}

// ownedViewOf is a record of a partitioning, as stored, its ownership if
// split, and, if it hides anything, the ranges it divides.
type ownedViewOf struct {
	record []byte
	owns   *Ownership
	hides  bool
	ranges [][2][]byte
}

// OwnedView returns r, a view of the committed state of shard id, as the
// shard's tables see it: without what the shard, split by a rescale, keeps
// hidden until the rescale ends.
func (a *Adapter[H, T]) OwnedView(id pc.ShardID, r Reader) (Reader, error) {
	var b, found, err = r.Get([]byte(PartitioningKey))
	if err != nil {
		return nil, fmt.Errorf("shard %s: reading the partitioning its state was built under: %w", id, err)
	} else if !found {
		return r, nil
	}
	var v = &a.views
	v.mu.Lock()
	var last, ok = v.last[id]
	v.mu.Unlock()
	if !ok || !bytes.Equal(last.record, b) {
		last = ownedViewOf{record: bytes.Clone(b)}
		var rec, _, err = readPartitioning(r)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", id, err)
		} else if last.owns = rec.Owns; rec.hides() {
			last.hides, last.ranges = true, a.splitRanges()
		}
		v.mu.Lock()
		if v.last == nil {
			v.last = make(map[pc.ShardID]ownedViewOf)
		}
		v.last[id] = last
		v.mu.Unlock()
	}
	if last.owns == nil {
		return r, nil
	} else if !last.hides {
		return ownership{Reader: r, own: *last.owns}, nil
	}
	return ownership{Reader: &ownedReader{r: r, h: &hider{ranges: last.ranges, own: *last.owns, ownerOf: a.ownerOf}}, own: *last.owns}, nil
}
