package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"

	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/keyenc"
)

// A new shard of a rescale whose parent's primary runs in its own member
// may start from links of the parent's files, rather than from a copy of
// the rows it owns: its store then holds the parent's whole state as of a
// commit after the split, in which what the new shard owns is as of the
// split (the parent no longer writes it). It hides the rest, as a split
// shard hides what it handed off, and drops it once its rescale ends. Its
// recovery log adopts the parent's files (recoverylog.Adopt): their bytes
// stay in the parent's log.

// ErrNotLinkable is returned by LinkForker.LinkFork when the new shard's
// store can't be built from links of its parent's files: the store or its
// parent's state is not of a kind that allows it. The shard forks from a
// copy of the rows it owns instead.
var ErrNotLinkable = errors.New("the store can't be built from links of its parent's files")

// FileLinker is implemented by StoreOpeners whose new store may be built
// on links of the files of another store of the same member (rocks.Opener
// is one).
type FileLinker interface {
	// LinkFiles makes the directory of rec hold the files of parent's state
	// as of now, in place of whatever rec recorded before: a store opened
	// on it holds the parent's rows. Rec records them without their bytes
	// where its recovery log can adopt those of the parent's. If it fails,
	// the directory is left holding nothing rec records.
	LinkFiles(ctx context.Context, parent Store, rec Recorder) error
}

// Flusher is implemented by stores whose FileLinker flushes what they hold
// in memory to files before it links them (rocks.Store is one). The primary
// of a shard asked to split has its store begin that flush as it sees the
// ask, before its split commits: the link that follows the split then
// flushes only what the store wrote since (under a backlog, mostly the
// commit before the split).
type Flusher interface {
	// FlushAhead begins to write what the store holds in memory to files,
	// in the background. It returns at once.
	FlushAhead()
}

// LinkForker is implemented by Forkers whose new shards may be built from
// links of their parent's files (Adapter is one, if its StoreOpener is a
// FileLinker).
type LinkForker interface {
	// LinkFork makes the directory of rec hold links of the files of
	// parent, the store of the shard's parent, for a store opened on it to
	// be forked by ForkLinked: once the parent's split is written to its
	// files (durable, unless parent is a WrittenStateReader), it calls
	// release, which ends every use of the directory (destroying the
	// shard's store), then links them, and returns once the split and
	// the linked files are durable. It returns ErrParentNotSplit
	// (wrapped) while the parent has not split, and ErrNotLinkable
	// (wrapped) if the store can't be built so, both before it calls
	// release. If it fails once it called release, the directory may hold
	// links, which the caller removes.
	LinkFork(shard Shard, parent Store, rec Recorder, release func()) error
	// CheckPlayed checks, as LinkFork does before it links, the copy of
	// the parent's files played from its recovery log into dir: a store
	// opened on links of its files, adopted from the parent's log, is then
	// forked by ForkLinked.
	CheckPlayed(shard Shard, dir string) error
	// ForkLinked builds the shard's first state from store, if it holds
	// its parent's state (linked by LinkFork, or from a copy checked by
	// CheckPlayed), and commits it: the shard's record of its
	// partitioning, which owns its partition and hides the rest, and the
	// checkpoint of the parent's split. It returns whether store held its
	// parent's state.
	ForkLinked(shard Shard, store Store) (bool, error)
}

var _ LinkForker = (*Adapter[any, *Txn])(nil)

// LinkFork makes the directory of rec hold links of the files of parent,
// the store of the shard's parent (see LinkForker).
func (a *Adapter[H, T]) LinkFork(shard Shard, parent Store, rec Recorder, release func()) error {
	var spec = shard.Spec()
	var linker, ok = a.stores.(FileLinker)
	if !ok {
		return fmt.Errorf("shard %s: %w: stores of %T", spec.Id, ErrNotLinkable, a.stores)
	}
	sr, ok := parent.(StateReader)
	if !ok {
		return fmt.Errorf("shard %s: %w: its parent's store %T can't be read from another shard", spec.Id, ErrNotLinkable, parent)
	}
	var m, err = a.forkTo(spec)
	if err != nil {
		return err
	}
	// The split read must be written to the parent's files before they
	// are linked (a commit started, which the read sees too, may not be
	// yet), and durable before the link is used. A store which tells when
	// it's written has the link flush its files meanwhile: the link waits
	// for the flushed files to be durable, and the split's commit, ordered
	// before them in the parent's recovery log, with them.
	var ctx, key = shard.Context(), []byte(ForkCheckpointKey)
	var read = func(r Reader) error { return linkable(spec, r, m) }
	var durable = func(context.Context) error { return nil }
	if wr, ok := sr.(WrittenStateReader); ok {
		durable, err = wr.ReadWritten(ctx, key, read)
	} else {
		err = sr.ReadState(ctx, key, read)
	}
	if err != nil {
		return err
	}
	release()
	var from = spec.LabelSet.ValueOf(LabelSplitFrom)
	err = linker.LinkFiles(ctx, parent, rec)
	if derr := durable(ctx); derr != nil && err == nil {
		err = fmt.Errorf("shard %s: the split of shard %s did not commit: %w", spec.Id, from, derr)
	} else if err != nil {
		err = fmt.Errorf("shard %s: linking the files of shard %s: %w", spec.Id, from, err)
	}
	return err
}

// CheckPlayed checks that the shard may be forked from links of the copy
// of its parent's files played into dir, by the same checks as LinkFork's:
// it returns ErrParentNotSplit (wrapped) while the copy is not split, and
// ErrNotLinkable (wrapped) if the state it split can't be linked.
func (a *Adapter[H, T]) CheckPlayed(shard Shard, dir string) error {
	var spec = shard.Spec()
	var opener, ok = a.stores.(ReadOnlyOpener)
	if !ok {
		return fmt.Errorf("shard %s: %w: stores of %T can't be opened read-only", spec.Id, ErrNotLinkable, a.stores)
	}
	var m, err = a.forkTo(spec)
	if err != nil {
		return err
	}
	parent, err := opener.OpenReadOnly(dir)
	if err != nil {
		return fmt.Errorf("shard %s: %w", spec.Id, err)
	}
	defer parent.Close()
	return linkable(spec, parent, m)
}

// linkable fails unless r, the state of the shard spec is split from, split
// for m partitions (else the error wraps ErrParentNotSplit) as this version
// splits, keeping what it hands off where it is, unmoved (else the error
// wraps ErrNotLinkable).
func linkable(spec *pc.ShardSpec, r Reader, m int) error {
	var rec, err = splitOf(spec, r, m)
	if err != nil {
		return err
	} else if rec.Moving != nil || !rec.Hidden || rec.Shard.String() != spec.LabelSet.ValueOf(LabelSplitFrom) {
		return fmt.Errorf("shard %s: %w: its parent was split by an earlier version", spec.Id, ErrNotLinkable)
	}
	var moved bool
	var handoff = []byte(HandoffPrefix)
	if err = r.Scan(handoff, keyenc.PrefixEnd(handoff), func(_, _ []byte) bool {
		moved = true
		return false
	}); err != nil {
		return fmt.Errorf("shard %s: reading the hand-off area of its parent: %w", spec.Id, err)
	} else if moved {
		return fmt.Errorf("shard %s: %w: its parent's hand-off area holds rows an earlier version moved", spec.Id, ErrNotLinkable)
	}
	return nil
}

// ForkLinked builds the shard's first state from store, if it holds its
// parent's state, linked (see LinkForker).
func (a *Adapter[H, T]) ForkLinked(shard Shard, store Store) (bool, error) {
	var spec = shard.Spec()
	var from = spec.LabelSet.ValueOf(LabelSplitFrom)
	var kvs, ok = store.(KVStore)
	if !ok || from == "" {
		return false, nil
	}
	var kv = kvs.KV()
	if rec, found, err := readPartitioning(kv); err != nil {
		return false, fmt.Errorf("shard %s: %w", spec.Id, err)
	} else if !found || rec.Shard.String() != from {
		return false, nil
	}
	var m, err = a.forkTo(spec)
	if err != nil {
		return true, err
	}
	parentRec, err := splitOf(spec, kv, m)
	if err != nil {
		return true, err
	}
	cp, err := forkCheckpoint(spec, kv)
	if err != nil {
		return true, err
	}
	var g = &partitionGuard{store: store, lists: a.familyLists()}
	index, err := g.ownIndex(spec)
	if err != nil {
		return true, err
	}
	// The parent's reserved keys, but for its record and its checkpoint
	// (both written anew), are its own (its fork checkpoint): deleted.
	// What a split divides stays, what another shard owns hidden, until
	// it's dropped.
	var reserved = []byte("\x01gazconsumer/")
	var drop [][]byte
	for _, gap := range gaps(reserved, keyenc.PrefixEnd(reserved), a.splitRanges()) {
		if err = kv.Scan(gap[0], gap[1], func(key, _ []byte) bool {
			if !bytes.Equal(key, []byte(PartitioningKey)) {
				drop = append(drop, bytes.Clone(key))
			}
			return true
		}); err != nil {
			return true, fmt.Errorf("shard %s: reading the reserved keys of shard %s: %w", spec.Id, from, err)
		}
	}
	for _, key := range drop {
		if err = kv.Delete(key); err != nil {
			return true, fmt.Errorf("shard %s: deleting reserved key %q of shard %s: %w", spec.Id, key, from, err)
		}
	}
	g.built = Partitioning{Families: maps.Clone(parentRec.Families), Mapping: MappingVersion, Owns: &Ownership{Index: index, Of: m},
		Handoff: true, Hidden: true, Batch: parentRec.Batch, Inherited: g.inheritedOf(parentRec)}
	if err = g.putRecord(kv, spec.Id); err != nil {
		return true, err
	} else if err = store.StartCommit(shard, cp, nil).Err(); err != nil {
		return true, fmt.Errorf("shard %s: committing the state linked from shard %s: %w", spec.Id, from, err)
	}
	slog.Info("shard forked from links of its parent's files", "shard", spec.Id, "from", from, "owns", index, "of", m,
		"readThrough", len(cp.Sources))
	return true, nil
}

// gaps returns the parts of [start, end) outside ranges, which are in key
// order and disjoint (a nil end of a range is the end of all keys).
func gaps(start, end []byte, ranges [][2][]byte) [][2][]byte {
	var out [][2][]byte
	for _, r := range ranges {
		if r[1] != nil && bytes.Compare(r[1], start) <= 0 || bytes.Compare(r[0], end) >= 0 {
			continue
		} else if bytes.Compare(start, r[0]) < 0 {
			out = append(out, [2][]byte{start, r[0]})
		}
		if r[1] == nil {
			return out
		}
		start = r[1]
	}
	if bytes.Compare(start, end) < 0 {
		out = append(out, [2][]byte{start, end})
	}
	return out
}
