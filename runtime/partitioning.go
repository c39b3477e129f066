package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
)

// PartitioningKey is the key, in the KV of a consumer with tables, of the
// partitioning its shard's state was built under: for each family of
// journal messages the shard reads (the journals of one message type), how
// many partitions it had, and the version of the mapping of partition keys
// to partitions (partition.Index). It's written in the shard's first
// transaction, so committed with its checkpoint. Its first byte, 0x01,
// begins no table's key (theirs begin with the encoding of a string).
const PartitioningKey = "\x01gazconsumer/partitioning"

// MappingVersion is the version of partition.Index's mapping of partition
// keys to partitions that shards record.
const MappingVersion = 1

// Partitioning is the value at PartitioningKey, as JSON.
type Partitioning struct {
	// Families maps the message type of each family the shard reads to its
	// count of partition journals.
	Families map[string]int `json:"families"`
	// Mapping is the version of the mapping (MappingVersion).
	Mapping int `json:"mapping"`
	// Owns is, for a shard split by a rescale (or forked from one split),
	// the keys it owns: it applies only their messages. Nil for a shard
	// never split, which applies every message of its journals.
	Owns *Ownership `json:"owns,omitempty"`
	// Handoff tells that the shard split and its rescale has not ended:
	// its store may keep rows it no longer owns (Hidden), or, split by an
	// earlier version, under HandoffPrefix, until the rescale ends.
	Handoff bool `json:"handoff,omitempty"`
	// Hidden tells that the shard, split, keeps what it no longer owns
	// where it was, unchanged, for the shards forked from it: hidden from
	// its tables, its queries and what falls due, until its rescale ends,
	// when it drops it (Moving).
	Hidden bool `json:"hidden,omitempty"`
	// Moving is, once a split shard's rescale ended, where its drop of what
	// it no longer owns goes on, a bounded part each transaction (see
	// handoffBatch); nil once done. (A split of an earlier version moved
	// what it no longer owned to its hand-off area, and recorded here where
	// the move went on: such a shard hides the rest, as Hidden.)
	Moving *HandoffCursor `json:"moving,omitempty"`
	// Dropping tells that the shard, its rescale ended, is deleting what it
	// no longer owns, and then its hand-off area, a bounded part each
	// transaction; Handoff stays set until the last is gone.
	Dropping bool `json:"dropping,omitempty"`
	// Batch is the bytes of keys and values the shard drops in one
	// transaction once its rescale ended, as its spec's LabelSplitBatch
	// said when it split (0: handoffBatch).
	Batch int `json:"batch,omitempty"`
	// Inherited are the journals a shard made by a rescale reads beside
	// those of its spec: those of the shards it was split from, in which
	// producers not yet switched to the new partitions may still write
	// keys it owns. Its spec lists only its own, as `gazconsumer specs`
	// writes it.
	Inherited []pb.Journal `json:"inherited,omitempty"`
	// Shard is the shard which wrote the record. A new shard of a rescale
	// whose store holds links of its parent's files finds its parent's
	// record there, until it writes its own (see LinkForker).
	Shard pc.ShardID `json:"shard,omitempty"`
}

// ErrRepartitioned is wrapped by the error failing a shard whose sources'
// family no longer has the partitions its state was built under.
var ErrRepartitioned = errors.New("the partitions of a family the shard reads changed since its state was built")

// partitionGuard holds, for one shard's store, the partitioning its state was
// built under, and checks the shard's sources against it.
type partitionGuard struct {
	store Store // Whose state was built under built.
	built Partitioning
	lists map[string]message.PartitionsFunc // Of each family read.

	// Of the journal of the last message checked (messages come in runs of
	// one journal, whose spec they share): its family's listing, and its
	// count of partitions as built (0 if the family is not recorded).
	last      *pb.JournalSpec
	lastList  message.PartitionsFunc
	lastBuilt int

	// filter is the ownership of the shard's messages in the current
	// transaction, if its state was split (as of the transaction's
	// beginning: a split applies from the next one).
	filter *Ownership
	keyBuf []byte

	// state is where built stands in a rescale, as last recorded: read by
	// RescaleState from other goroutines than the transactions'.
	state   atomic.Pointer[rescaleRecord]
	dropped int // What the drop in progress deleted so far.
}

// guardPartitions returns the partitionGuard of store, which reads and (on
// its first transaction) writes the record of kv.
//
// Guards are kept by shard id, one a shard (a shard's next store, of another
// assignment, has its own).
func (a *Adapter[H, T]) guardPartitions(shard Shard, store Store, kv KV) (*partitionGuard, error) {
	var id = shard.Spec().Id
	if g := a.guardOf(shard, store); g != nil {
		return g, nil
	}
	var g = &partitionGuard{store: store, lists: make(map[string]message.PartitionsFunc)}
	var current = Partitioning{Families: make(map[string]int), Mapping: MappingVersion}
	for _, in := range a.inputs {
		if _, ok := g.lists[in.Name]; ok {
			continue
		}
		var list = a.families.of(a.journals, in.Name)
		g.lists[in.Name] = list
		var journals = list().Journals
		if len(journals) == 0 {
			continue // Not listed yet: unknown.
		}
		current.Families[in.Name] = len(journals)
	}

	var built, found, err = readPartitioning(kv)
	switch {
	case err != nil:
		return nil, fmt.Errorf("shard %s: %w", id, err)
	case found:
		if g.built = built; g.built.Mapping != MappingVersion {
			return nil, fmt.Errorf("shard %s: %w: its state was built under version %d of the mapping of partition keys, this build maps by version %d", id, ErrRepartitioned, g.built.Mapping, MappingVersion)
		}
	default:
		g.built = current
		if err = g.putRecord(kv, id); err != nil {
			return nil, err
		}
	}
	g.recordState()
	a.guards.Store(id, g)
	return g, nil
}

// guardOf returns the partitionGuard of the shard's store, if its first
// transaction made one, or nil.
func (a *Adapter[H, T]) guardOf(shard Shard, store Store) *partitionGuard {
	if g, ok := a.guards.Load(shard.Spec().Id); ok && g.(*partitionGuard).store == store {
		return g.(*partitionGuard)
	}
	return nil
}

// hides reports whether the shard's store may keep rows of its tables, timers
// and what falls due that it no longer owns, where its own are: rows
// hidden from its tables, its queries and what it fires.
func (p *Partitioning) hides() bool {
	return p.Owns != nil && (p.Hidden || p.Moving != nil)
}

// readPartitioning returns the partitioning recorded in r (a shard's state),
// and whether there is one.
func readPartitioning(r Reader) (Partitioning, bool, error) {
	var rec Partitioning
	var b, found, err = r.Get([]byte(PartitioningKey))
	if err != nil {
		return rec, false, fmt.Errorf("reading the partitioning its state was built under: %w", err)
	} else if !found {
		return rec, false, nil
	} else if err = json.Unmarshal(b, &rec); err != nil {
		return rec, false, fmt.Errorf("decoding the partitioning its state was built under (%q): %w", b, err)
	}
	return rec, true, nil
}

// check fails if a family the shard reads has other than the partitions its
// state was built under.
func (g *partitionGuard) check(shard Shard, consumer string) error {
	for _, family := range slices.Sorted(maps.Keys(g.lists)) {
		var n = len(g.lists[family]().Journals)
		var built, ok = g.built.Families[family]
		if n == 0 || !ok || n == built {
			continue // Not listed (yet), or as built.
		} else if g.built.Owns != nil && n == g.built.Owns.Of {
			continue // Split since, for a rescale to n.
		} else if m, err := g.splitToAsOf(shard, family); err != nil {
			return err
		} else if n == m {
			continue // The shard splits its state for a rescale to n at the end of this transaction.
		}
		return fmt.Errorf("shard %s: %w: family %s=%s now has %d partitions, but the shard's state was built under %d (recorded with its checkpoint). "+
			"Committing under the new partitioning would split the state of a key between shards, so the shard stops. "+
			"Restore the family to %d journals (gazctl journals apply), then grow consumer %s with `gazconsumer rescale --consumer %s`, "+
			"which splits its state by key across the new shards",
			shard.Spec().Id, ErrRepartitioned, labels.MessageType, family, n, built, built, consumer, consumer)
	}
	return nil
}

// splitToAsOf returns the count of partitions the shard's spec asks its
// consumer to be rescaled to (see splitTo), as of the etcd revision of the
// listing of family's journals, or later, if the shard's spec is read from
// the same etcd: a rescale labels the shards before it creates the
// journals, so a member seeing the journals before the label waits for it.
func (g *partitionGuard) splitToAsOf(shard Shard, family string) (int, error) {
	var m, err = splitTo(shard.Spec())
	var hdr = g.lists[family]().Header.Etcd
	var awaiter, ok = shard.(RevisionAwaiter)
	if err != nil || !ok || hdr.ClusterId == 0 {
		return m, err
	}
	var ctx, cancel = context.WithTimeout(shard.Context(), specWait)
	defer cancel()
	if err = awaiter.AwaitRevision(ctx, hdr); err != nil {
		slog.Warn("shard can't read its spec as of the listing of its family's journals", "shard", shard.Spec().Id,
			"family", family, "revision", hdr.Revision, "err", err)
		return m, nil
	}
	return splitTo(shard.Spec())
}

// specWait bounds how long a shard waits for its spec to be as of the etcd
// revision its families' journals were listed at.
const specWait = 10 * time.Second

// checkJournal fails, as check does, if the family of the journal of env
// has other than the partitions the shard's state was built under: checked
// at each message, so that a change seen mid-transaction fails the
// transaction before it commits. (Messages are not checked against the
// partition their key maps to: producers outside gazconsumer may map keys
// otherwise, and a consumer's state need not be keyed by partition key.)
func (g *partitionGuard) checkJournal(shard Shard, env message.Envelope, consumer string) error {
	if env.Journal != g.last {
		var family = env.Journal.LabelSet.ValueOf(labels.MessageType)
		g.last, g.lastList, g.lastBuilt = env.Journal, g.lists[family], g.built.Families[family]
		if g.built.Owns != nil && g.lastBuilt != 0 {
			g.lastBuilt = g.built.Owns.Of // As it is once the rescale's journals exist.
		}
	}
	if g.lastList == nil || g.lastBuilt == 0 {
		return nil
	}
	if n := len(g.lastList().Journals); n != 0 && n != g.lastBuilt {
		return g.check(shard, consumer)
	}
	return nil
}

// families lists the journals of each family (message type), as an Adapter
// asks them of its PartitionLister, once each.
type families struct {
	mu    sync.Mutex
	lists map[string]message.PartitionsFunc
}

// of returns the listing of the journals of message type name.
func (f *families) of(lister PartitionLister, name string) message.PartitionsFunc {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.lists[name]; ok {
		return l
	}
	if f.lists == nil {
		f.lists = make(map[string]message.PartitionsFunc)
	}
	var l = lister.Partitions(pb.LabelSelector{Include: pb.MustLabelSet(labels.MessageType, name)})
	f.lists[name] = l
	return l
}
