package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"

	"github.com/gazconsumer/gazconsumer/keyenc"
	"github.com/gazconsumer/gazconsumer/runtime/due"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
)

// A consumer with tables is rescaled, from n partitions of each family it
// reads to M (a multiple of n), while it runs (`gazconsumer rescale`):
//
//  1. Its shards are labeled LabelSplitTo=M. At the end of its next
//     transaction, each shard p splits its state: it records that it owns
//     index p of M and marks its checkpoint (ForkCheckpointKey). From the
//     next transaction on, it applies and fires only what it owns, and
//     hides what it no longer owns (rows and timers whose partition keys
//     map elsewhere among M partitions, with their entries of the index of
//     what falls due) from its tables and queries: it keeps them where they
//     are, unchanged, for its new shards, writing nothing for them.
//  2. The families get their new journals; producers switch to them as
//     they see them (partition.Watched).
//  3. Each new shard q (LabelSplitFrom=p; its spec lists its own journals)
//     starts from p's state as of its split, keeping the rows it owns: read
//     from p's store if p's primary runs in q's member, as soon as p's
//     split is durable, or else played from p's recovery log. It keeps p's
//     marked checkpoint, from which it reads p's journals again (inherited,
//     as its state records), applying only the messages it owns. So every
//     message is applied once, by the one shard owning its key, and every
//     row is seen by one shard's tables and queries.
//  4. Once every new shard serves, LabelSplitTo is removed, and the shards
//     split drop what they no longer own, a batch a transaction.

// LabelSplitTo labels the shards of a consumer being rescaled: its value is
// the count of partitions each family read is rescaled to.
const LabelSplitTo = "gazconsumer.dev/split-to"

// LabelSplitFrom labels a shard made by a rescale: its value is the id of
// the shard whose state it starts from, and whose journals it reads too.
const LabelSplitFrom = "gazconsumer.dev/split-from"

// LabelSplitBatch labels, if an operator wants other than the default
// (handoffBatch), the shards of a consumer being rescaled: its value is the
// bytes of keys and values each drops in one transaction once its rescale
// ends (within a quarter of its transactions' bound, LabelMaxTxnBytes and
// LabelMaxTxnWrites). A shard records it as it splits; labeled again while
// it drops, it drops by the label's.
const LabelSplitBatch = "gazconsumer.dev/split-batch"

// LabelSplitSettle labels the new shards of a rescale in progress: its
// value is how long producers are given to switch to the rescale's new
// journals (a Go duration), which were created before the shards were. A
// new shard reads its parent's journals again first, through their write
// heads as of then, so it takes them no sooner than this after its primary
// began: a key's messages written before its producer switched are applied
// before those written after.
const LabelSplitSettle = "gazconsumer.dev/split-settle"

// SplitSettleOf returns the duration of spec's LabelSplitSettle, or 0.
func SplitSettleOf(spec *pc.ShardSpec) (time.Duration, error) {
	var v = spec.LabelSet.ValueOf(LabelSplitSettle)
	if v == "" {
		return 0, nil
	}
	var d, err = time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("shard %s: label %s=%q is not a duration (such as 5s)", spec.Id, LabelSplitSettle, v)
	}
	return d, nil
}

// HandoffPrefix begins the keys of the rows which a shard split by an
// earlier version no longer owned, moved there (under HandoffPrefix and
// their own key) for the new shards forked from it until the rescale ended.
// Tables never see them. Forks still read them, and the end of a rescale
// drops them.
const HandoffPrefix = "\x01gazconsumer/handoff/"

// ForkCheckpointKey is the key of the checkpoint of a shard's split
// transaction, from which the shards forked from it go on.
const ForkCheckpointKey = "\x01gazconsumer/fork-checkpoint"

// Ownership is which keys a shard split by a rescale owns: those whose
// partition keys map to partition Index of Of (partition.Index).
type Ownership struct {
	Index int `json:"index"`
	Of    int `json:"of"`
}

// HandoffCursor is where the drop of what a split shard no longer owns goes
// on, once its rescale ended: at the first store key after After (at the
// first key of the state, if After is nil). Moved counts what was dropped
// so far (or, of an earlier version's split, moved to the hand-off area).
// Scanned is the bytes its store held of the keys gone through, as it
// estimated each batch's as the drop went through them (see RangeSizer).
type HandoffCursor struct {
	After   []byte `json:"after,omitempty"`
	Moved   int    `json:"moved"`
	Scanned uint64 `json:"scanned,omitempty"`
}

// handoffBatch bounds the bytes of keys and values a shard drops in one
// transaction, once its rescale ended: the drop of a large state's half
// takes as many transactions as it needs (each begun at once, as something
// due), and none holds more than this much of it, nor more than a share of
// the keys and bytes its shard's transactions are bounded to (dropShare).
var handoffBatch = 16 << 20

// dropShare is the part (1/dropShare) of a transaction's bound (MaxTxnOf)
// that a drop of what a split shard no longer owns may take of one of its
// transactions, which consume their sources with the rest. A drop of a
// batch past the transaction's bound stopped consumption until the drops
// were done: four shards split from two, dropping 16 MiB (about 200,000 of
// the example ledger's rows) a transaction, consumed at 0.04 of their rate
// before the split for the 7.5 s the drops took; taking half the bound, at
// 0.39 for 21 s (bench/cmd/rescalebench, under a backlog). Where a shard
// keeps up with its sources its transactions are short, and begin at once
// while it drops, so its drop goes on at about the rate of its commits.
const dropShare = 4

// ErrParentNotSplit is returned by Forker.Fork and Forker.ForkFrom while
// the shard a new shard is forked from has not yet committed its split.
var ErrParentNotSplit = errors.New("the shard to fork from has not split its state yet")

// Forker is implemented by Applications whose shards may be forked from
// another's state by a rescale (runtime.Adapter is one).
type Forker interface {
	// NeedsFork tells whether the shard, labeled LabelSplitFrom, has still
	// to be forked: its store holds no state of its own yet.
	NeedsFork(Shard, Store) (bool, error)
	// Fork builds the shard's first state in store, from the state of the
	// shard it's split from, a copy of whose files is in dir (played from
	// its recovery log), and commits it. It returns ErrParentNotSplit
	// (wrapped) if that state is not split yet: the caller plays the log
	// again later.
	Fork(shard Shard, store Store, dir string) error
	// ForkFrom is Fork, from the state of the shard it's split from, read
	// from that shard's store once that shard's split is durable.
	ForkFrom(shard Shard, store Store, parent StateReader) error
	// Inherited returns the journals the shard reads beside its spec's
	// sources, as inherited from the shards it was split from: its state
	// records them when it's forked.
	Inherited(Shard, Store) ([]pb.Journal, error)
}

// ReadOnlyOpener is implemented by StoreOpeners which open a copy of a
// store's files read-only (rocks.Opener does).
type ReadOnlyOpener interface {
	OpenReadOnly(dir string) (ReadCloser, error)
}

// StateReader is implemented by stores whose whole state, the reserved keys
// too, may be read from any goroutine (txnkv.Store is one). A new shard of a
// rescale forks so from its parent's store when the parent's primary runs in
// its own member, rather than by playing the parent's recovery log.
type StateReader interface {
	// ReadState calls fn with a view of the store's state as of the
	// commits it started, durable or not, and of those applied as fn runs,
	// which it doesn't hold off (perhaps some of a commit's writes and not
	// others, and a row being written half-written): fn relies only on
	// rows no commit writes. It returns once the commit which wrote key
	// settled, if one not yet durable did, and the commits before it are
	// durable (fn relies on no row of a later one), failing if one
	// failed: what fn read is the caller's only then.
	ReadState(ctx context.Context, settled []byte, fn func(Reader) error) error
}

// WrittenStateReader is implemented by StateReaders which tell when the
// commits a read of their state relies on are written to their files,
// before those are durable (txnkv.Store is one). A new shard linking its
// parent's files then has them flushed as the split's commit goes on
// becoming durable, rather than after.
type WrittenStateReader interface {
	StateReader
	// ReadWritten is ReadState, but returns once the commits ReadState
	// would wait for are written to the store's files, durable or not,
	// with durable, which waits for them to be durable and fails if one
	// failed: what fn read is the caller's only once durable returns nil.
	// Unless ReadWritten fails, the caller calls durable once.
	ReadWritten(ctx context.Context, settled []byte, fn func(Reader) error) (durable func(context.Context) error, err error)
}

// ReadCloser is a Reader of a store's files opened read-only, whose Get
// reads every key (the reserved ones too), and which is closed once read.
type ReadCloser interface {
	Reader
	Close()
}

var _ Forker = (*Adapter[any, *Txn])(nil)

// handoffBatchOf returns the bytes the shard drops in one transaction once
// its rescale ended: as its spec's LabelSplitBatch says, or else as rec's
// Batch, or else handoffBatch.
func handoffBatchOf(spec *pc.ShardSpec, rec *Partitioning) (int, error) {
	var v = spec.LabelSet.ValueOf(LabelSplitBatch)
	if v == "" && rec.Batch != 0 {
		return rec.Batch, nil
	} else if v == "" {
		return handoffBatch, nil
	}
	var n, err = strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("shard %s: label %s=%q is not a count of bytes", spec.Id, LabelSplitBatch, v)
	}
	return n, nil
}

// dropBound returns the bound of what one transaction of a split shard
// whose rescale ended drops of what it no longer owns: its batch of bytes
// (handoffBatchOf), and dropShare of what its spec bounds a transaction to
// (MaxTxnOf), in keys and bytes, so that the transaction goes on consuming
// with the rest.
func dropBound(spec *pc.ShardSpec, rec *Partitioning) (TxnBound, error) {
	var batch, err = handoffBatchOf(spec, rec)
	if err != nil {
		return TxnBound{}, err
	}
	txn, err := MaxTxnOf(spec)
	if err != nil {
		return TxnBound{}, err
	}
	var b = TxnBound{Bytes: batch}
	if txn.Bytes > 0 {
		b.Bytes = min(b.Bytes, max(1, txn.Bytes/dropShare))
	}
	if txn.Writes > 0 {
		b.Writes = max(1, txn.Writes/dropShare)
	}
	return b, nil
}

// splitTo returns the count of partitions the shard's spec asks its
// consumer to be rescaled to, or 0 if it asks none.
func splitTo(spec *pc.ShardSpec) (int, error) {
	var v = spec.LabelSet.ValueOf(LabelSplitTo)
	if v == "" {
		return 0, nil
	}
	var m, err = strconv.Atoi(v)
	if err != nil || m < 1 {
		return 0, fmt.Errorf("shard %s: label %s=%q is not a count of partitions", spec.Id, LabelSplitTo, v)
	}
	return m, nil
}

// ownIndex returns the index of the partition the shard reads as its own,
// among the families' journals as listed now: that of the journal of the
// largest index among its sources of a family (a shard split from another
// reads the other's journals too, whose indices are smaller).
func (g *partitionGuard) ownIndex(spec *pc.ShardSpec) (int, error) {
	var index = -1
	for _, family := range slices.Sorted(maps.Keys(g.lists)) {
		var journals = g.lists[family]().Journals
		var own = -1
		for i, j := range journals {
			for _, src := range spec.Sources {
				if src.Journal == j.Spec.Name {
					own = i
				}
			}
		}
		if own == -1 {
			continue
		} else if index != -1 && own != index {
			return 0, fmt.Errorf("shard %s reads partition %d of family %s=%s, but partition %d of another: its sources are not one partition of each family",
				spec.Id, own, labels.MessageType, family, index)
		}
		index = own
	}
	if index == -1 {
		return 0, fmt.Errorf("shard %s reads no journal of the families of its consumer", spec.Id)
	}
	return index, nil
}

// ownsMessage reports whether the shard owns msg, when its state was split:
// whether msg's partition key maps to the index it owns (a message without
// one is everyone's).
func (g *partitionGuard) ownsMessage(msg message.Message) bool {
	var k, ok = msg.(partition.Keyed)
	if !ok {
		return true
	}
	g.keyBuf = k.AppendPartitionKey(g.keyBuf[:0])
	return partition.Index(g.keyBuf, g.filter.Of) == g.filter.Index
}

// putRecord writes the guard's record of the partitioning into kv, as
// shard id's.
func (g *partitionGuard) putRecord(kv KV, id pc.ShardID) error {
	g.built.Shard = id
	var b, err = json.Marshal(g.built)
	if err != nil {
		return fmt.Errorf("shard %s: encoding its partitioning: %w", id, err)
	} else if err = kv.Put([]byte(PartitioningKey), b); err != nil {
		return fmt.Errorf("shard %s: recording its partitioning: %w", id, err)
	}
	g.recordState()
	return nil
}

// The phases of a shard's state in a rescale (RescaleState.Phase).
const (
	// RescaleSplit is the phase of a shard whose state was split by a
	// rescale that has not ended: it keeps the rows it no longer owns,
	// hidden, for the new shards to fork from (a new shard linked to its
	// parent's files keeps its parent's so).
	RescaleSplit = "split"
	// RescaleDropping is the phase of a split shard whose rescale ended:
	// it deletes what it no longer owns, a batch a transaction.
	RescaleDropping = "dropping"
)

// RescaleState is where a shard's state stands in a rescale, as its last
// transaction recorded it.
type RescaleState struct {
	// Phase is RescaleSplit, RescaleDropping, or empty: no work of a
	// rescale is left to the shard.
	Phase string
	// Index is the partition the shard owns of Of, if its state was ever
	// split or forked by a rescale (else Of is 0).
	Index, Of int
	// Dropped counts the rows, timers and records of what falls due that
	// the shard's drop has deleted so far (of RescaleDropping).
	Dropped int
	// Through estimates the share of the shard's state that its drop has
	// gone through (of RescaleDropping; else 0), from 0 to 1: the bytes its
	// store held of the keys of its tables, timers and what falls due that
	// the drop went through, as it went, over those and the bytes it holds
	// after the drop's place (see RangeSizer); 1 once it went through all.
	// Before, it is -1 if the store can't tell (it isn't a RangeSizer, or
	// holds nothing of them that it counts).
	Through float64
}

// RangeSizer is implemented by stores which estimate the bytes they hold of a
// range of keys (rocks.Store and mem.Store are): a shard dropping what it
// no longer owns tells, by them, how far through its state it is.
type RangeSizer interface {
	// ApproximateSizes returns the bytes, as the store estimates them, of
	// the rows it holds committed from each range's first key up to its
	// second (exclusive), in the order of ranges: a store may leave out rows
	// it holds in a form it can't estimate (rocks.Store, those of its
	// memtables). It may be called concurrently with transactions.
	ApproximateSizes(ranges [][2][]byte) ([]uint64, error)
}

// RescaleReporter is implemented by Applications which tell where each
// shard's state stands in a rescale (Adapter is one): a member exports it
// as metrics, and the console shows it.
type RescaleReporter interface {
	// RescaleState returns where the state of the shard's store stands, as
	// its last transaction recorded it, or false before the store's first
	// transaction. It may be called concurrently with transactions.
	RescaleState(shard Shard, store Store) (RescaleState, bool)
}

var _ RescaleReporter = (*Adapter[any, *Txn])(nil)

// RescaleState returns where the state of the shard's store stands in a
// rescale (see RescaleReporter).
func (a *Adapter[H, T]) RescaleState(shard Shard, store Store) (RescaleState, bool) {
	var g = a.guardOf(shard, store)
	if g == nil {
		return RescaleState{}, false
	}
	var rec = g.state.Load()
	if rec == nil {
		return RescaleState{}, false
	}
	var st = rec.RescaleState
	switch {
	case st.Phase != RescaleDropping:
	case rec.passed:
		st.Through = 1
	default:
		st.Through = a.dropThrough(store, rec.cursor)
	}
	return st, true
}

// dropThrough estimates, from store's sizes of splitRanges, the share of
// them a drop at cur has gone through, or -1 (see RescaleState.Through):
// the bytes it went through (cur.Scanned), over those and the bytes after
// it, as store holds them now.
func (a *Adapter[H, T]) dropThrough(store Store, cur HandoffCursor) float64 {
	var rest, ok = a.sizeOf(store, a.unmoved(cur))
	if !ok || cur.Scanned+rest == 0 {
		return -1
	}
	return float64(cur.Scanned) / float64(cur.Scanned+rest)
}

// sizeBetween returns the bytes store holds, as it estimates them, of
// splitRanges from cur up to key through (included), or 0 if it can't
// tell: what a drop goes through from cur to through, as it goes.
func (a *Adapter[H, T]) sizeBetween(store Store, cur HandoffCursor, through []byte) uint64 {
	var limit = append(bytes.Clone(through), 0)
	var ranges [][2][]byte
	for _, r := range a.unmoved(cur) {
		if bytes.Compare(r[0], limit) >= 0 {
			break
		} else if bytes.Compare(r[1], limit) > 0 {
			r[1] = limit
		}
		ranges = append(ranges, r)
	}
	var n, _ = a.sizeOf(store, ranges)
	return n
}

// sizeOf returns the bytes store holds of ranges, as it estimates them,
// and whether it can tell (it's a RangeSizer, and estimated them).
func (a *Adapter[H, T]) sizeOf(store Store, ranges [][2][]byte) (uint64, bool) {
	var sizer, ok = store.(RangeSizer)
	if !ok {
		return 0, false
	}
	var sizes, err = sizer.ApproximateSizes(ranges)
	if err != nil {
		slog.Warn("can't estimate the size of a drop's state", "consumer", a.c.Name, "err", err)
		return 0, false
	}
	var n uint64
	for _, size := range sizes {
		n += size
	}
	return n, true
}

// recordState records where g's record stands in a rescale, for
// RescaleState.
func (g *partitionGuard) recordState() {
	var b, rec = &g.built, new(rescaleRecord)
	var st = &rec.RescaleState
	if b.Owns != nil {
		st.Index, st.Of = b.Owns.Index, b.Owns.Of
	}
	switch {
	case b.Handoff && b.Dropping:
		st.Phase = RescaleDropping
		if b.Moving != nil {
			g.dropped = b.Moving.Moved
			rec.cursor = *b.Moving
		} else {
			rec.passed = true
		}
		// (Once the rows are dropped, as dropUnowned last counted them,
		// while the drop goes on in a hand-off area.)
		st.Dropped = g.dropped
	case b.Handoff:
		st.Phase = RescaleSplit
		g.dropped = 0
	default:
		g.dropped = 0
	}
	g.state.Store(rec)
}

// rescaleRecord is where a guard's record stands in a rescale: its
// RescaleState but for Through, and where its drop is: at cursor, or past
// all it had to go through.
type rescaleRecord struct {
	RescaleState
	cursor HandoffCursor
	passed bool
}

// ownerOf returns the owner of what is stored under key stored among of
// partitions: of a row or a timer, by the ownership of its table or
// timers; of an entry of the index of what falls due or an expiry record,
// that of its subject (see subjectOf).
func (a *Adapter[H, T]) ownerOf(stored []byte, of int, buf *[]byte) (int, error) {
	var key, err = subjectOf(stored)
	if err != nil {
		return 0, err
	}
	for i := range a.c.Tables {
		var t = &a.c.Tables[i]
		if bytes.Compare(key, t.Start) < 0 || bytes.Compare(key, t.End) >= 0 {
			continue
		} else if t.PartitionKey == nil {
			return 0, fmt.Errorf("table %s has no partition key: %s", t.Name, t.Unowned)
		}
		var pk, err = t.PartitionKey((*buf)[:0], key)
		if err != nil {
			return 0, err
		}
		*buf = pk
		return partition.Index(pk, of), nil
	}
	return 0, fmt.Errorf("key %x is of no table or timer of the consumer", key)
}

// subjectOf returns the store key of the row or timer that key concerns:
// key itself, or the subject of an entry of the index of what falls due
// (due.Prefix) or of an expiry record (due.ExpiryPrefix). So an entry and a
// record go wherever their row or timer goes in a split.
func subjectOf(key []byte) ([]byte, error) {
	switch {
	case bytes.HasPrefix(key, []byte(due.Prefix)):
		var _, _, subject, err = due.ParseKey(key)
		return subject, err
	case bytes.HasPrefix(key, []byte(due.ExpiryPrefix)):
		return key[len(due.ExpiryPrefix):], nil
	}
	return key, nil
}

// splitRanges returns the ranges of store keys a split divides between the
// shards: those of each table and of each type of timer (a.c.Tables lists
// both), and, of a consumer that keeps time, the index of what falls due and
// the expiry records.
func (a *Adapter[H, T]) splitRanges() [][2][]byte {
	var out [][2][]byte
	for _, t := range a.c.Tables {
		out = append(out, [2][]byte{t.Start, t.End})
	}
	if a.keepsTime() {
		out = append(out, [2][]byte{[]byte(due.Prefix), due.End()},
			[2][]byte{[]byte(due.ExpiryPrefix), keyenc.PrefixEnd([]byte(due.ExpiryPrefix))})
	}
	// In key order: a move goes through them in one pass.
	slices.SortFunc(out, func(a, b [2][]byte) int { return bytes.Compare(a[0], b[0]) })
	return out
}

// rescalable fails if the consumer's state can't be split by key.
func (a *Adapter[H, T]) rescalable() error {
	for _, in := range a.inputs {
		if _, ok := in.New().(partition.Keyed); !ok {
			return fmt.Errorf("consumer %s can't be rescaled: its messages %s have no partition key", a.c.Name, in.Name)
		}
	}
	if len(a.c.Tables) == 0 {
		return fmt.Errorf("consumer %s can't be rescaled: it was generated without the ownership of its tables' rows (regenerate it)", a.c.Name)
	}
	for _, tm := range a.c.Timers {
		if !slices.ContainsFunc(a.c.Tables, func(t TableOwnership) bool { return bytes.Equal(t.Start, tm.Start) }) {
			return fmt.Errorf("consumer %s can't be rescaled: it was generated without the ownership of its timers %s (regenerate it)", a.c.Name, tm.Name)
		}
	}
	for _, t := range a.c.Tables {
		if t.PartitionKey == nil {
			return fmt.Errorf("consumer %s can't be rescaled: %s", a.c.Name, t.Unowned)
		}
	}
	return nil
}

// split splits the state of the shard, at the end of its transaction, if
// its spec asks for a rescale its state was not yet split for: it records
// the ownership and marks the transaction's checkpoint for the new shards.
// It writes nothing else: what it won't own stays where it is, hidden.
func (a *Adapter[H, T]) split(shard Shard, store Store, kv KV, g *partitionGuard) error {
	var spec = shard.Spec()
	if g.built.Moving != nil {
		// Its rescale ended and it drops what it no longer owns, at the
		// transaction's beginning (dropHandoff); or it was split by an
		// earlier version, which moved it: what's left stays, hidden.
		return nil
	}
	var m, err = splitTo(spec)
	if err != nil || m == 0 {
		return err
	}
	var of = g.ownedOf()
	if m == of {
		return nil // Split already.
	} else if m%of != 0 {
		return fmt.Errorf("shard %s: label %s=%d is not a multiple of the %d partitions its state was built under", spec.Id, LabelSplitTo, m, of)
	} else if g.built.Handoff && g.built.Dropping {
		return nil // Its last rescale's leftovers go first: it splits once they're dropped.
	} else if g.built.Handoff {
		return fmt.Errorf("shard %s: can't split to %d partitions: the rescale to %d has not finished (the shard still keeps rows for the shards split from it)", spec.Id, m, of)
	} else if err = a.rescalable(); err != nil {
		return fmt.Errorf("shard %s: %w", spec.Id, err)
	}
	var forker, ok = store.(interface{ ForkAtCommit(key []byte) })
	if !ok {
		return fmt.Errorf("shard %s: consumer %s can't be rescaled: store %T can't mark a checkpoint to fork from", spec.Id, a.c.Name, store)
	}
	var batch int
	if spec.LabelSet.ValueOf(LabelSplitBatch) != "" {
		if batch, err = handoffBatchOf(spec, &g.built); err != nil {
			return err
		}
	}
	var index = 0
	if g.built.Owns != nil {
		index = g.built.Owns.Index
	} else if index, err = g.ownIndex(spec); err != nil {
		return err
	}
	// Until the rescale's journals exist, the families have the count the
	// state was owned under before the split: both counts are the shard's.
	for family := range g.built.Families {
		g.built.Families[family] = of
	}
	// From the next transaction on, the shard applies only the messages it
	// owns, fires only what it owns, and its tables and queries see only
	// what it owns: what it won't own is no longer written, so its new
	// shards may fork from its state as of any commit from this one on.
	g.built.Owns, g.built.Handoff, g.built.Hidden, g.built.Batch = &Ownership{Index: index, Of: m}, true, true, batch
	forker.ForkAtCommit([]byte(ForkCheckpointKey))
	slog.Info("shard split its state for a rescale", "shard", spec.Id, "consumer", a.c.Name, "owns", index, "of", m)
	return g.putRecord(kv, spec.Id)
}

// dropUnowned deletes the next of what the shard, split, no longer owns
// (rows and timers, with their entries of the index of what falls due and
// their expiry records), up to its bound (dropBound), from
// where the drop is, and records where it goes on, or that it's done.
func (a *Adapter[H, T]) dropUnowned(spec *pc.ShardSpec, kv KV, g *partitionGuard) error {
	var id, own, cur = spec.Id, *g.built.Owns, *g.built.Moving
	var bound, err = dropBound(spec, &g.built)
	if err != nil {
		return err
	}
	var keys [][]byte
	var size int
	var full bool
	var buf []byte
	for _, r := range a.unmoved(cur) {
		// Keys are collected, then deleted: a scan's callback may not write.
		var serr error
		err = kv.Scan(r[0], r[1], func(key, value []byte) bool {
			if bound.reachedAt(size, len(keys)) {
				full = true
				return false
			}
			var owner int
			if owner, serr = a.ownerOf(key, own.Of, &buf); serr != nil {
				return false
			} else if owner != own.Index {
				keys = append(keys, bytes.Clone(key))
				size += len(key) + len(value)
			}
			return true
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return fmt.Errorf("shard %s: dropping what it no longer owns: %w", id, err)
		} else if full {
			break
		}
	}
	for _, k := range keys {
		if err := kv.Delete(k); err != nil {
			return fmt.Errorf("shard %s: dropping %x, which it no longer owns: %w", id, k, err)
		}
	}
	cur.Moved += len(keys)
	g.dropped = cur.Moved
	if full {
		cur.After = keys[len(keys)-1]
		cur.Scanned += a.sizeBetween(g.store, *g.built.Moving, cur.After)
		g.built.Moving = &cur
		if slog.Default().Enabled(context.Background(), slog.LevelDebug) {
			slog.Debug("shard dropped part of what it no longer owns", "shard", id, "dropped", cur.Moved,
				"through", a.dropThrough(g.store, cur))
		}
	} else {
		g.built.Moving = nil
		slog.Info("shard dropped what it no longer owns", "shard", id, "consumer", a.c.Name,
			"owns", own.Index, "of", own.Of, "dropped", cur.Moved)
	}
	return g.putRecord(kv, id)
}

// unmoved returns the ranges of store keys a drop (or an earlier version's
// move) has still to go through from cur: splitRanges, from the first key
// after cur.After.
func (a *Adapter[H, T]) unmoved(cur HandoffCursor) [][2][]byte {
	var out [][2][]byte
	for _, r := range a.splitRanges() {
		if cur.After != nil {
			if bytes.Compare(cur.After, r[1]) >= 0 {
				continue // Gone through already.
			} else if bytes.Compare(cur.After, r[0]) >= 0 {
				r[0] = append(bytes.Clone(cur.After), 0)
			}
		}
		out = append(out, r)
	}
	return out
}

// dropHandoff deletes the next part of what a split shard whose rescale has
// ended (its spec has no LabelSplitTo) no longer owns, up to its bound
// (dropBound), and then of its hand-off area, if it has one; with the last, the
// record says the rescale's end is done.
func (a *Adapter[H, T]) dropHandoff(shard Shard, kv KV, g *partitionGuard) error {
	var id = shard.Spec().Id
	if !g.built.Handoff || !g.built.Dropping && shard.Spec().LabelSet.ValueOf(LabelSplitTo) != "" {
		return nil
	} else if g.built.Hidden {
		// The rescale ended: its new shards serve (they forked from the
		// state as of the split), and what the shard kept for them is
		// dropped where it is, a batch a transaction.
		slog.Info("shard's rescale ended: it drops what it no longer owns", "shard", id)
		g.built.Hidden, g.built.Moving, g.built.Dropping = false, &HandoffCursor{}, true
	}
	if g.built.Moving != nil {
		// (Or an earlier version's split stopped moving it there, ended.)
		g.built.Dropping = true
		return a.dropUnowned(shard.Spec(), kv, g)
	}
	var bound, err = dropBound(shard.Spec(), &g.built)
	if err != nil {
		return err
	}
	g.built.Dropping = true
	var keys [][]byte
	var size int
	var full bool
	var start = []byte(HandoffPrefix)
	if err := kv.Scan(start, keyenc.PrefixEnd(start), func(key, value []byte) bool {
		if full = bound.reachedAt(size, len(keys)); full {
			return false
		}
		keys, size = append(keys, bytes.Clone(key)), size+len(key)+len(value)
		return true
	}); err != nil {
		return fmt.Errorf("shard %s: reading its hand-off area: %w", id, err)
	}
	if !full {
		keys = append(keys, []byte(ForkCheckpointKey))
		g.built.Handoff, g.built.Dropping, g.built.Batch = false, false, 0
	}
	for _, k := range keys {
		if err := kv.Delete(k); err != nil {
			return fmt.Errorf("shard %s: dropping its hand-off area: %w", id, err)
		}
	}
	if !full {
		slog.Info("shard ended its rescale", "shard", id)
		if c, ok := g.store.(Compactor); ok {
			c.CompactAfterCommit()
		}
	}
	return g.putRecord(kv, id)
}

// Compactor is implemented by stores which rewrite their files on demand
// (rocks.Store is one). A shard whose rescale ended has its store rewrite
// them once it has dropped what it no longer owns: the space of what it
// dropped is reclaimed, and a new shard's files no longer share those of
// the shard it was split from (its recovery log no longer adopts its
// parent's: see LinkForker).
type Compactor interface {
	// CompactAfterCommit has the store rewrite its files in the background
	// once its next commit is applied.
	CompactAfterCommit()
}

// handingOff reports whether the shard has work of a rescale to do: to
// split as its spec asks, or, its rescale ended, to drop what it no longer
// owns. Its next transaction does it, due at once.
func (a *Adapter[H, T]) handingOff(shard Shard, store Store) bool {
	var g = a.guardOf(shard, store)
	if g == nil {
		return false
	}
	var b = &g.built
	var m, err = splitTo(shard.Spec())
	if b.Handoff {
		return b.Dropping || m == 0
	}
	// A split asked, which the next transaction does (or fails on).
	return err != nil || m != 0 && m != g.ownedOf()
}

// NeedsFork tells whether the shard, labeled LabelSplitFrom, is still to be
// forked: its store has no record of a partitioning, or another shard's
// (its parent's, linked: see LinkForker).
func (a *Adapter[H, T]) NeedsFork(shard Shard, store Store) (bool, error) {
	var kvs, ok = store.(KVStore)
	if !ok || a.c.NewTxn == nil {
		return false, fmt.Errorf("shard %s: consumer %s has no tables: its shards can't be forked", shard.Spec().Id, a.c.Name)
	}
	var rec, found, err = readPartitioning(kvs.KV())
	if err != nil {
		return false, fmt.Errorf("shard %s: %w", shard.Spec().Id, err)
	}
	// A store holding links of its parent's files holds its parent's record.
	return !found || rec.Shard != "" && rec.Shard != shard.Spec().Id, nil
}

// Fork builds the first state of the shard from that of the shard it is
// split from, whose files (played from its recovery log) are in dir: the
// rows which this shard owns, which the other keeps hidden, and its
// checkpoint as of its split, from which this shard reads its journals
// again. It commits them to store.
func (a *Adapter[H, T]) Fork(shard Shard, store Store, dir string) error {
	var spec = shard.Spec()
	var opener, ok = a.stores.(ReadOnlyOpener)
	if !ok {
		return fmt.Errorf("shard %s: consumer %s's stores (%T) can't be opened read-only to fork from", spec.Id, a.c.Name, a.stores)
	}
	var parent, err = opener.OpenReadOnly(dir)
	if err != nil {
		return fmt.Errorf("shard %s: %w", spec.Id, err)
	}
	defer parent.Close()
	var cp, load, err2 = a.fork(shard, store, parent)
	if err2 != nil {
		return err2
	}
	return a.commitFork(shard, store, cp, load)
}

// ForkFrom builds the first state of the shard from the state of the shard
// it is split from, read from its store once its split's commit has
// started, and committed once that commit is durable, as Fork does from a
// copy of its files. What it keeps, the other no longer
// writes: the other's later commits, durable or not, don't change it (so
// its reads don't hold off the other's commits). A store that is a Loader
// writes the rows aside as they're read, and takes them once what was read
// is durable.
func (a *Adapter[H, T]) ForkFrom(shard Shard, store Store, parent StateReader) error {
	var cp pc.Checkpoint
	var load Loading
	if err := parent.ReadState(shard.Context(), []byte(ForkCheckpointKey), func(r Reader) (err error) {
		cp, load, err = a.fork(shard, store, r)
		return err
	}); err != nil {
		if load != nil {
			load.Abort() // What was read is not durable.
		}
		return err
	}
	return a.commitFork(shard, store, cp, load)
}

// commitFork commits the state a fork built in store, with the checkpoint
// of the split it forked from, having finished its load of the rows first
// if the store is a Loader (load is nil if not: the fork wrote them to its
// transaction).
func (a *Adapter[H, T]) commitFork(shard Shard, store Store, cp pc.Checkpoint, load Loading) error {
	var spec = shard.Spec()
	if load != nil {
		var began = time.Now()
		var n, err = load.Finish()
		if err != nil {
			return fmt.Errorf("shard %s: loading the rows forked from shard %s: %w", spec.Id, spec.LabelSet.ValueOf(LabelSplitFrom), err)
		}
		slog.Info("shard loaded the rows it forked", "shard", spec.Id, "rows", n, "took", time.Since(began))
	}
	if err := store.StartCommit(shard, cp, nil).Err(); err != nil {
		return fmt.Errorf("shard %s: committing the state forked from shard %s: %w", spec.Id, spec.LabelSet.ValueOf(LabelSplitFrom), err)
	}
	return nil
}

// fork builds in store, uncommitted, the first state of the shard from
// parent's, and returns the checkpoint of parent's split to commit it with,
// and, if store is a Loader, the load of the rows it keeps, to finish (else
// it writes them to store's transaction). Run again, it writes the same.
func (a *Adapter[H, T]) fork(shard Shard, store Store, parent Reader) (_ pc.Checkpoint, _ Loading, err error) {
	var spec = shard.Spec()
	var from = spec.LabelSet.ValueOf(LabelSplitFrom)
	var m int
	if m, err = a.forkTo(spec); err != nil {
		return pc.Checkpoint{}, nil, err
	}
	var kvs, ok = store.(KVStore)
	if !ok {
		return pc.Checkpoint{}, nil, a.notKV(store)
	}
	var kv = kvs.KV()

	var parentRec Partitioning
	if parentRec, err = splitOf(spec, parent, m); err != nil {
		return pc.Checkpoint{}, nil, err
	}
	var cp pc.Checkpoint
	if cp, err = forkCheckpoint(spec, parent); err != nil {
		return pc.Checkpoint{}, nil, err
	}

	var g = &partitionGuard{store: store, lists: a.familyLists()}
	index, err := g.ownIndex(spec)
	if err != nil {
		return pc.Checkpoint{}, nil, err
	}
	// Rows, timers, entries of the index of what falls due and expiry
	// records alike: an entry keeps its time, so what fell due during the
	// fork fires as the shard serves. They are where they were, unchanged
	// since the split (the parent writes only what it owns, and hides the
	// rest); of a parent split by an earlier version, which moved them,
	// those it moved are in its hand-off area. Its unmoved rows are read
	// first: were a move applied between the reads (see StateReader), its
	// rows would be read twice, alike, rather than missed. Of a parent
	// which moved nothing, the hand-off area is read first.
	var handoff = [2][]byte{[]byte(HandoffPrefix), keyenc.PrefixEnd([]byte(HandoffPrefix))}
	var ranges [][2][]byte
	if parentRec.Moving != nil {
		ranges = append(a.unmoved(*parentRec.Moving), handoff)
	} else if parentRec.Hidden {
		ranges = append([][2][]byte{handoff}, a.splitRanges()...)
	} else {
		ranges = [][2][]byte{handoff}
	}
	var load Loading
	if l, ok := store.(Loader); ok {
		if load, err = l.BeginLoad(); err != nil {
			return pc.Checkpoint{}, nil, fmt.Errorf("shard %s: %w", spec.Id, err)
		}
		defer func() {
			if err != nil {
				load.Abort()
			}
		}()
	}
	// Rows kept are added to the load as they're read, once they come in
	// key order: past an empty hand-off area of a parent which moved
	// nothing. Else they're held, in runs of key order, and added sorted.
	var rows = new(forkRows)
	var streaming bool
	var kept, buf = 0, []byte(nil)
	for i, r := range ranges {
		if i == 1 && load != nil && parentRec.Moving == nil && len(rows.rows) == 0 && inKeyOrder(ranges[1:]) {
			streaming = true
		}
		if !streaming {
			rows.run()
		}
		var serr error
		if err = parent.Scan(r[0], r[1], func(key, value []byte) bool {
			var rowKey = bytes.TrimPrefix(key, []byte(HandoffPrefix))
			var owner int
			if owner, serr = a.ownerOf(rowKey, m, &buf); serr != nil {
				return false
			} else if owner == index {
				kept++
				switch {
				case load == nil:
					serr = kv.Put(rowKey, value)
				case streaming:
					serr = load.Add(rowKey, value)
				default:
					rows.add(rowKey, value)
				}
			}
			return serr == nil
		}); err == nil {
			err = serr
		}
		if err != nil {
			return pc.Checkpoint{}, nil, fmt.Errorf("shard %s: copying the rows it owns from shard %s: %w", spec.Id, from, err)
		}
	}
	if load != nil && !streaming {
		if err = rows.sorted(); err != nil {
			return pc.Checkpoint{}, nil, fmt.Errorf("shard %s: the rows forked from shard %s: %w", spec.Id, from, err)
		}
		for key, value := range rows.all() {
			if err = load.Add(key, value); err != nil {
				return pc.Checkpoint{}, nil, fmt.Errorf("shard %s: the rows forked from shard %s: %w", spec.Id, from, err)
			}
		}
	}
	if rec, _, err := readPartitioning(parent); err != nil {
		return pc.Checkpoint{}, nil, fmt.Errorf("shard %s: of shard %s: %w", spec.Id, from, err)
	} else if rec.Dropping {
		return pc.Checkpoint{}, nil, fmt.Errorf("shard %s: shard %s began to drop the rows it handed off as this shard read them (its rescale was ended, label %s removed, before this shard forked): "+
			"this shard can't be built; delete it, and rescale again", spec.Id, from, LabelSplitTo)
	}
	// It reads again the journals the parent read.
	g.built = Partitioning{Families: maps.Clone(parentRec.Families), Mapping: MappingVersion, Owns: &Ownership{Index: index, Of: m},
		Inherited: g.inheritedOf(parentRec)}
	if err = g.putRecord(kv, spec.Id); err != nil {
		return pc.Checkpoint{}, nil, err
	}
	slog.Info("shard forked from another's state", "shard", spec.Id, "from", from, "rows", kept,
		"owns", index, "of", m, "readThrough", pc.FlattenReadThrough(cp))
	return cp, load, nil
}

// forkTo returns the count of partitions a shard made by a rescale, spec,
// is forked for, failing if its spec doesn't say (LabelSplitTo) or the
// consumer's state can't be split.
func (a *Adapter[H, T]) forkTo(spec *pc.ShardSpec) (int, error) {
	var m, err = splitTo(spec)
	if err != nil {
		return 0, err
	} else if m == 0 {
		return 0, fmt.Errorf("shard %s: labeled %s=%s but not %s", spec.Id, LabelSplitFrom, spec.LabelSet.ValueOf(LabelSplitFrom), LabelSplitTo)
	} else if err = a.rescalable(); err != nil {
		return 0, fmt.Errorf("shard %s: %w", spec.Id, err)
	}
	return m, nil
}

// familyLists returns the lists of the journals of each family the consumer
// reads.
func (a *Adapter[H, T]) familyLists() map[string]message.PartitionsFunc {
	var lists = make(map[string]message.PartitionsFunc)
	for _, in := range a.inputs {
		lists[in.Name] = a.families.of(a.journals, in.Name)
	}
	return lists
}

// splitOf returns the record of the partitioning of the state of the shard
// spec is split from, read by parent, if it split for m partitions (else
// an error wrapping ErrParentNotSplit) and its rescale has not ended.
func splitOf(spec *pc.ShardSpec, parent Reader, m int) (Partitioning, error) {
	var from = spec.LabelSet.ValueOf(LabelSplitFrom)
	var rec, found, err = readPartitioning(parent)
	switch {
	case err != nil:
		return rec, fmt.Errorf("shard %s: of shard %s: %w", spec.Id, from, err)
	case !found:
		return rec, fmt.Errorf("shard %s: %w: shard %s has no record of its partitioning", spec.Id, ErrParentNotSplit, from)
	case rec.Owns == nil || rec.Owns.Of != m:
		return rec, fmt.Errorf("shard %s: %w: shard %s owns %+v, not a split to %d partitions", spec.Id, ErrParentNotSplit, from, rec.Owns, m)
	case !rec.Handoff || rec.Dropping:
		return rec, fmt.Errorf("shard %s: shard %s split for %d partitions, but has dropped the rows it handed off (its rescale was ended, label %s removed, before this shard forked): "+
			"this shard can't be built; delete it, and rescale again", spec.Id, from, m, LabelSplitTo)
	}
	return rec, nil
}

// forkCheckpoint returns the checkpoint of the split of the shard spec is
// split from, read by parent, without its acknowledgements (the parent's
// transaction's own to write).
func forkCheckpoint(spec *pc.ShardSpec, parent Reader) (pc.Checkpoint, error) {
	var from = spec.LabelSet.ValueOf(LabelSplitFrom)
	var cp pc.Checkpoint
	var b, found, err = parent.Get([]byte(ForkCheckpointKey))
	if err != nil {
		return cp, fmt.Errorf("shard %s: reading the checkpoint of shard %s's split: %w", spec.Id, from, err)
	} else if !found {
		return cp, fmt.Errorf("shard %s: shard %s's split has no checkpoint to fork from", spec.Id, from)
	} else if err = cp.Unmarshal(b); err != nil {
		return cp, fmt.Errorf("shard %s: decoding the checkpoint of shard %s's split: %w", spec.Id, from, err)
	}
	cp.AckIntents = nil
	return cp, nil
}

// inheritedOf returns the journals a shard forked from a shard of record
// rec reads as inherited: those the other read, its own (of its index, in
// each family) and those it inherited.
func (g *partitionGuard) inheritedOf(rec Partitioning) []pb.Journal {
	var inherited = slices.Clone(rec.Inherited)
	for _, list := range g.lists {
		if journals := list().Journals; rec.Owns != nil && rec.Owns.Index < len(journals) {
			inherited = append(inherited, journals[rec.Owns.Index].Spec.Name)
		}
	}
	slices.Sort(inherited)
	return slices.Compact(inherited)
}

// inKeyOrder reports whether ranges follow one another in key order, none
// overlapping the next.
func inKeyOrder(ranges [][2][]byte) bool {
	for i := 1; i < len(ranges); i++ {
		if prev := ranges[i-1][1]; prev == nil || bytes.Compare(prev, ranges[i][0]) > 0 {
			return false
		}
	}
	return true
}

// ownedOf returns the count of partitions the shard's ownership is of: that
// of its split, or else the count its families had when its state was built.
func (g *partitionGuard) ownedOf() int {
	if g.built.Owns != nil {
		return g.built.Owns.Of
	}
	var of = 0
	for _, n := range g.built.Families {
		of = max(of, n)
	}
	return max(of, 1)
}

// Inherited returns the journals the shard reads as inherited from the
// shards it was split from, as its state records them (none for a shard
// never forked).
func (a *Adapter[H, T]) Inherited(shard Shard, store Store) ([]pb.Journal, error) {
	var kvs, ok = store.(KVStore)
	if !ok || a.c.NewTxn == nil {
		return nil, nil
	}
	var rec, _, err = readPartitioning(kvs.KV())
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", shard.Spec().Id, err)
	}
	return rec.Inherited, nil
}
