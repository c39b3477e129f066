package runtime_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"

	"github.com/gazconsumer/gazconsumer/keyenc"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/due"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
	"github.com/gazconsumer/gazconsumer/store/mem"
)

// tallyHandler sums the cents of orders by customer, under the customer's
// name, in table "sums" (keys beginning with "c"). Each order also writes
// the customer's row of table "seen" ("s" and the name), which expires
// (ttl), and sets the customer's timer ("t" and the name), in place of any:
// both hold the order's offset, and what fires or expires is logged.
type tallyHandler struct{ log *timeLog }

// timeLog logs what a tallyHandler's timers and expiring rows do, by the
// offset of the order that set them.
type timeLog struct {
	ttl, delay time.Duration
	set        map[uint64]string // The customer of each order.
	replaced   [2]map[uint64]bool
	fired      [2]map[uint64][]pc.ShardID
	owns       map[pc.ShardID]runtime.Ownership // Of each shard, as the test knows it.
}

// Kinds of timeLog's maps.
const (
	logTimer = iota
	logExpiry
)

func newTimeLog(rng *rand.Rand) *timeLog {
	var l = &timeLog{
		ttl:   time.Duration(1+rng.IntN(20)) * time.Second,
		delay: time.Duration(1+rng.IntN(20)) * time.Second,
		set:   map[uint64]string{}, owns: map[pc.ShardID]runtime.Ownership{},
	}
	for i := range 2 {
		l.replaced[i], l.fired[i] = map[uint64]bool{}, map[uint64][]pc.ShardID{}
	}
	return l
}

func (h tallyHandler) OnOrder(tx *counterTxn, msg *order) error {
	var v, _, err = tx.kv.Get([]byte(msg.Customer))
	if err != nil {
		return err
	}
	var sum = msg.Cents
	if len(v) == 8 {
		sum += int64(binary.BigEndian.Uint64(v))
	}
	if err = tx.kv.Put([]byte(msg.Customer), binary.BigEndian.AppendUint64(nil, uint64(sum))); err != nil || h.log == nil {
		return err
	}
	// Its tables see only the rows its shard owns, though a shard split
	// keeps those it no longer owns until its rescale ends.
	var own = h.log.owns[tx.Shard.Spec().Id]
	for _, table := range [][2]string{{"c", "d"}, {"s", "u"}} {
		var serr error
		if err = tx.kv.Scan([]byte(table[0]), []byte(table[1]), func(key, _ []byte) bool {
			var pk = key
			if table[0] != "c" {
				pk = key[1:]
			}
			if p := partition.Index(pk, own.Of); p != own.Index {
				serr = fmt.Errorf("shard %s (owning %d of %d) sees %q, of partition %d", tx.Shard.Spec().Id, own.Index, own.Of, key, p)
			}
			return serr == nil
		}); err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
	}
	var id = uint64(tx.Envelope.End)
	h.log.set[id] = msg.Customer
	for kind, k := range []string{"t" + msg.Customer, "s" + msg.Customer} {
		if v, found, err := tx.kv.Get([]byte(k)); err != nil {
			return err
		} else if found {
			h.log.replaced[kind][binary.BigEndian.Uint64(v)] = true
		}
		if err = tx.kv.Put([]byte(k), binary.BigEndian.AppendUint64(nil, id)); err != nil {
			return err
		}
		var at, dk = tx.Now().Add(h.log.delay), due.Timer
		if kind == logExpiry {
			at, dk = tx.Now().Add(h.log.ttl), due.Expiry
		}
		if err = scheduleAt(tx.kv, []byte(k), at, dk); err != nil {
			return err
		}
	}
	return nil
}

// scheduleAt has store key k fall due at at, in place of when it was to, as
// package runtime/table does.
func scheduleAt(kv runtime.KV, k []byte, at time.Time, kind due.Kind) error {
	var record = due.AppendExpiryKey(nil, k)
	if v, found, err := kv.Get(record); err != nil {
		return err
	} else if found {
		var was, err = due.ParseTime(v)
		if err == nil {
			err = kv.Delete(due.AppendKey(nil, was, kind, k))
		}
		if err != nil {
			return err
		}
	}
	if err := kv.Put(due.AppendKey(nil, at, kind, k), nil); err != nil {
		return err
	}
	return kv.Put(record, due.AppendTime(nil, at))
}

// fired logs a firing of kind, of the timer or row of key and value.
func (h tallyHandler) fired(kind int, tx *counterTxn, key, value []byte) error {
	var id = tx.Shard.Spec().Id
	h.log.fired[kind][binary.BigEndian.Uint64(value)] = append(h.log.fired[kind][binary.BigEndian.Uint64(value)], id)
	if own := h.log.owns[id]; partition.Index(key[1:], own.Of) != own.Index {
		return fmt.Errorf("shard %s (owning %d of %d) fired %q, of partition %d", id, own.Index, own.Of, key, partition.Index(key[1:], own.Of))
	}
	return nil
}

func (tallyHandler) FinalizeTxn(*counterTxn) error { return nil }

var tally = &runtime.Consumer[tallyHandler, *counterTxn]{
	Name:        "test.Tally",
	Inputs:      []runtime.Input[tallyHandler, *counterTxn]{runtime.Handle("test.Order", labels.ContentType_JSONLines, "OnOrder", tallyHandler.OnOrder)},
	NewTxn:      func(kv runtime.KV) *counterTxn { return &counterTxn{kv: kv} },
	FinalizeTxn: tallyHandler.FinalizeTxn,
	Tables: []runtime.TableOwnership{{
		Name: "sums", Start: []byte("c"), End: []byte("d"),
		PartitionKey: func(b, key []byte) ([]byte, error) { return append(b, key...), nil },
	}, {
		Name: "seen", Start: []byte("s"), End: []byte("t"),
		PartitionKey: func(b, key []byte) ([]byte, error) { return append(b, key[1:]...), nil },
	}, {
		Name: "timer:t", Start: []byte("t"), End: []byte("u"),
		PartitionKey: func(b, key []byte) ([]byte, error) { return append(b, key[1:]...), nil },
	}},
	Expiring: []runtime.Expiring[tallyHandler, *counterTxn]{{Table: "seen", Start: []byte("s"), End: []byte("t"),
		Expire: func(h tallyHandler, tx *counterTxn, key, value []byte) error {
			return h.fired(logExpiry, tx, key, value)
		}}},
	Timers: []runtime.Timing[tallyHandler, *counterTxn]{{Name: "timer:t", Start: []byte("t"), End: []byte("u"),
		Fire: func(h tallyHandler, tx *counterTxn, key, value []byte) error {
			return h.fired(logTimer, tx, key, value)
		}}},
}

// rescaleShard is a Shard of a spec a test changes.
type rescaleShard struct{ spec pc.ShardSpec }

func (s *rescaleShard) Context() context.Context                 { return context.Background() }
func (s *rescaleShard) Spec() *pc.ShardSpec                      { return &s.spec }
func (s *rescaleShard) Assignment() keyspace.KeyValue            { return keyspace.KeyValue{} }
func (s *rescaleShard) JournalClient() client.AsyncJournalClient { return nil }

// orderFamily lists n journals of test.Order, a count a test may grow.
type orderFamily struct{ n int }

func (f *orderFamily) journal(i int) pb.Journal {
	return pb.Journal(fmt.Sprintf("orders/part-%03d", i))
}

func (f *orderFamily) Partitions(pb.LabelSelector) message.PartitionsFunc {
	return func() *pb.ListResponse {
		var l = new(pb.ListResponse)
		for i := range f.n {
			l.Journals = append(l.Journals, pb.ListResponse_Journal{Spec: pb.JournalSpec{
				Name: f.journal(i), LabelSet: pb.MustLabelSet(labels.MessageType, "test.Order")}})
		}
		return l
	}
}

// snapshotOpener is a StoreOpener whose read-only stores are the snapshot
// of a parent's db, whatever their directory: the state a new shard forks
// from.
type snapshotOpener struct{ db, parent *mem.DB }

func (o snapshotOpener) OpenStore(runtime.Shard, runtime.Recorder) (runtime.Store, error) {
	return mem.Open(o.db), nil
}

// LinkFiles makes the db hold the parent's rows, as a store linked from the
// parent's files holds them.
func (o snapshotOpener) LinkFiles(context.Context, runtime.Store, runtime.Recorder) error {
	o.db.Link(o.parent)
	return nil
}

func (o snapshotOpener) OpenReadOnly(string) (runtime.ReadCloser, error) {
	return readCloser{o.parent.Snapshot()}, nil
}

type readCloser struct{ runtime.Reader }

func (readCloser) Close() {}

// TestSplitAndFork splits the state of each of n shards for a rescale to
// n*k partitions at random moments, and forks the new shards from them, once
// or twice over (the shards of a rescale split again): for random loads,
// every key's sum is in exactly one shard, the one owning it, and equals the
// load's, whether the messages after a split were applied by the parent or
// by its new shards reading the parent's journal again.
func TestSplitAndFork(t *testing.T) {
	for seed := range uint64(40) {
		var rng = rand.New(rand.NewPCG(seed, 3))
		var n = 1 + rng.IntN(3)
		var factors = []int{2 + rng.IntN(2)}
		if rng.IntN(2) == 0 {
			factors = append(factors, 2)
		}
		t.Run(fmt.Sprintf("seed=%d/%d*%v", seed, n, factors), func(t *testing.T) { splitAndFork(t, rng, n, factors) })
	}
	if unsizedDrops.Load() == 0 {
		t.Error("no shard dropped what it no longer owns from a store that can't estimate sizes")
	}
}

// unsizedDrops counts the transactions of splitAndFork's shards dropping
// what they no longer own from a store that can't estimate sizes.
var unsizedDrops atomic.Int64

// FuzzSplitAndFork is TestSplitAndFork, of loads and rescales the fuzzer
// picks: shards (1-3), and one or two rescales of factors 2-4.
func FuzzSplitAndFork(f *testing.F) {
	f.Add(uint64(1), uint8(1), uint8(0), uint8(0))
	f.Add(uint64(7), uint8(2), uint8(1), uint8(2))
	f.Fuzz(func(t *testing.T, seed uint64, n, k1, k2 uint8) {
		var factors = []int{2 + int(k1%3)}
		if k2%4 != 0 {
			factors = append(factors, 1+int(k2%4))
		}
		splitAndFork(t, rand.New(rand.NewPCG(seed, 5)), 1+int(n%3), factors)
	})
}

// putOnly is a mem.Store but not a runtime.Loader nor a runtime.RangeSizer:
// its BeginLoad and ApproximateSizes are hidden by noLoad's, of the same
// depth.
type putOnly struct {
	*mem.Store
	noLoad
}

type noLoad struct{}

func (noLoad) BeginLoad()        {}
func (noLoad) ApproximateSizes() {}

// rescaleState returns where s's state stands in a rescale, as its
// application reports it.
func rescaleState(t *testing.T, s *forkShard) runtime.RescaleState {
	t.Helper()
	var st, ok = s.app.(runtime.RescaleReporter).RescaleState(s.sh, s.store)
	if !ok {
		t.Fatalf("shard %s: no rescale state after a transaction", s.sh.spec.Id)
	}
	return st
}

// forkShard is a shard of splitAndFork.
type forkShard struct {
	sh    *rescaleShard
	db    *mem.DB
	store runtime.Store
	app   runtime.Application
	own   pb.Journal
}

// checkHidden checks that s, split to own index p of m partitions, hides from
// its queries (runtime.OwnedViewer) the rows it no longer owns, which its
// store keeps for the shards forked from it until its rescale ends.
func checkHidden(t *testing.T, s *forkShard, m, p int) {
	t.Helper()
	if st := rescaleState(t, s); st.Phase != runtime.RescaleSplit || st.Index != p || st.Of != m || st.Dropped != 0 {
		t.Errorf("shard %s, split to own %d of %d: rescale state %+v", s.sh.spec.Id, p, m, st)
	}
	var raw = s.db.Snapshot()
	var view, err = s.app.(runtime.OwnedViewer).OwnedView(s.sh.spec.Id, raw)
	if err != nil {
		t.Fatal(err)
	}
	var po, ok = view.(runtime.PartitionOwner)
	if !ok {
		t.Fatalf("shard %s, split: its view %T is not a runtime.PartitionOwner", s.sh.spec.Id, view)
	}
	for _, table := range [][2]string{{"c", "d"}, {"s", "u"}} {
		var pkOf = func(key []byte) []byte {
			if table[0] == "c" {
				return key
			}
			return key[1:]
		}
		var owner = func(key []byte) int { return partition.Index(pkOf(key), m) }
		var visible int
		if err = view.Scan([]byte(table[0]), []byte(table[1]), func(key, _ []byte) bool {
			if o := owner(key); o != p {
				t.Errorf("shard %s (owning %d of %d): a query sees %q, of partition %d", s.sh.spec.Id, p, m, key, o)
			}
			visible++
			return true
		}); err != nil {
			t.Fatal(err)
		}
		var keys [][]byte
		if err = raw.Scan([]byte(table[0]), []byte(table[1]), func(key, _ []byte) bool {
			keys = append(keys, bytes.Clone(key))
			return true
		}); err != nil {
			t.Fatal(err)
		}
		var owned int
		for _, key := range keys {
			var _, found, err = view.Get(key)
			if err != nil {
				t.Fatal(err)
			} else if mine := owner(key) == p; po.OwnsPartitionKey(pkOf(key)) != mine {
				t.Errorf("shard %s (owning %d of %d): owns the partition key of %q: %t", s.sh.spec.Id, p, m, key, !mine)
			} else if found != mine {
				t.Errorf("shard %s (owning %d of %d): a query of %q (partition %d) finds it: %t", s.sh.spec.Id, p, m, key, owner(key), found)
			} else if mine {
				owned++
			}
		}
		if owned != visible {
			t.Errorf("shard %s: a query's scan of %s sees %d rows, its gets %d", s.sh.spec.Id, table[0], visible, owned)
		}
	}
}

func splitAndFork(t *testing.T, rng *rand.Rand, n int, factors []int) {
	// The end of a rescale drops what a shard split no longer owns in one
	// transaction, or in many.
	var batch = []string{"", "1", "60", "500"}[rng.IntN(4)]
	// And within a quarter of the keys the shards bound a transaction to (the
	// default, 50,000, or a few), so that the transaction consumes too.
	var maxWrites = []int{0, 1, 4, 9}[rng.IntN(4)]
	var family = &orderFamily{n: n}
	var want = map[string]int64{}
	var log = newTimeLog(rng)
	var now = time.Unix(1_000_000_000, 0)
	var customers = 5 + rng.IntN(60)
	// routed is the count of partitions producers route by: the
	// journals' count, until a rescale has its new shards serve.
	var routed = n
	// msgs returns count orders of keys mapping to partition p of routed:
	// of the customers, or of the first names after them if none of them
	// maps there.
	var msgs = func(p, count int) []*order {
		var keys []string
		for i := 0; i < customers || len(keys) == 0; i++ {
			if c := "c-" + strconv.Itoa(i); partition.Index([]byte(c), routed) == p {
				keys = append(keys, c)
			}
		}
		var out []*order
		for range count {
			out = append(out, &order{Customer: keys[rng.IntN(len(keys))], Cents: int64(1 + rng.IntN(100))})
		}
		return out
	}
	var offset pb.Offset
	// apply runs one transaction of msgs read from journal j, committed
	// with a checkpoint through offset.
	var apply = func(s *forkShard, j pb.Journal, msgs []*order) {
		t.Helper()
		var bf = s.app.(runtime.BeginFinisher)
		if err := bf.BeginTxn(s.sh, s.store); err != nil {
			t.Fatal(err)
		}
		// What it wrote as it began (a drop, a record of its partitioning
		// and, as a drop ends, the mark of the split's checkpoint).
		if _, writes := s.store.(runtime.TxnSizer).TxnSize(); maxWrites != 0 && writes > max(1, maxWrites/4)+2 {
			t.Fatalf("shard %s wrote %d keys as its transaction began, bounded to %d a transaction", s.sh.spec.Id, writes, maxWrites)
		}
		// Each transaction begins a second after the last, and fires what
		// fell due by then.
		now = now.Add(time.Second)
		if _, err := s.app.(runtime.Timekeeper).Fire(s.sh, s.store, now, nil, runtime.TxnBound{}); err != nil {
			t.Fatal(err)
		}
		for _, msg := range msgs {
			offset += 10
			var env = message.Envelope{Journal: &pb.JournalSpec{Name: j, LabelSet: pb.MustLabelSet(labels.MessageType, "test.Order")},
				Begin: offset - 10, End: offset, Message: msg}
			if err := s.app.ConsumeMessage(s.sh, s.store, env, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.app.FinalizeTxn(s.sh, s.store, nil); err != nil {
			t.Fatal(err)
		}
		var cp = pc.Checkpoint{Sources: map[pb.Journal]pc.Checkpoint_Source{j: {ReadThrough: offset}}}
		if err := s.store.StartCommit(s.sh, cp, nil).Err(); err != nil {
			t.Fatal(err)
		}
		if err := bf.FinishTxn(s.sh, s.store, nil); err != nil {
			t.Fatal(err)
		}
	}
	var open = func(index int, own pb.Journal, parent *forkShard) *forkShard {
		var id = fmt.Sprintf("s-%02d", index)
		log.owns[pc.ShardID(id)] = runtime.Ownership{Index: index, Of: family.n}
		var s = &forkShard{sh: &rescaleShard{spec: pc.ShardSpec{Id: pc.ShardID(id)}}, db: mem.NewDB(), own: own}
		var parentDB *mem.DB
		if parent != nil {
			parentDB = parent.db
		}
		s.sh.spec.Sources = []pc.ShardSpec_Source{{Journal: own}}
		if maxWrites != 0 {
			s.sh.spec.LabelSet.SetValue(runtime.LabelMaxTxnWrites, strconv.Itoa(maxWrites))
		}
		var a, err = runtime.NewAdapter(tally, tallyHandler{log}, snapshotOpener{s.db, parentDB}, family)
		if err != nil {
			t.Fatal(err)
		}
		s.app, s.store = a, mem.Open(s.db)
		if parent != nil && rng.IntN(2) == 0 {
			// A store that can't load rows: the fork writes them to its
			// transaction.
			s.store = putOnly{Store: mem.Open(s.db)}
			if _, ok := s.store.(runtime.Loader); ok {
				t.Fatal("putOnly is a runtime.Loader")
			} else if _, ok = s.store.(runtime.RangeSizer); ok {
				t.Fatal("putOnly is a runtime.RangeSizer")
			}
		}
		return s
	}
	// fork forks child from parent: from a copy of its files, or from its
	// store, or from links of its files, as its member does if it runs
	// parent's primary too.
	var fork = func(child, parent *forkShard) error {
		var lf = child.app.(runtime.LinkForker)
		switch rng.IntN(4) {
		case 0:
			return child.app.(runtime.Forker).Fork(child.sh, child.store, "")
		case 1, 2:
			if rng.IntN(2) == 0 {
				// Linked from its parent's store.
				if err := lf.LinkFork(child.sh, parent.store, nil, func() { child.store.Destroy() }); err != nil {
					return err
				}
			} else {
				// Adopted from a copy of its parent's files.
				if err := lf.CheckPlayed(child.sh, ""); err != nil {
					return err
				}
				child.store.Destroy()
				child.db.Link(parent.db)
			}
			child.store = mem.Open(child.db)
			if linked, err := lf.ForkLinked(child.sh, child.store); err != nil || !linked {
				return fmt.Errorf("ForkLinked: %t, %w", linked, err)
			} else if need, err := child.app.(runtime.Forker).NeedsFork(child.sh, child.store); err != nil || need {
				return fmt.Errorf("NeedsFork after ForkLinked: %t, %w", need, err)
			}
			return nil
		}
		return child.app.(runtime.Forker).ForkFrom(child.sh, child.store, parent.store.(runtime.StateReader))
	}
	// handingOff tells whether s has hand-off work to do, which a
	// transaction begun at once does.
	var handingOff = func(s *forkShard) bool {
		t.Helper()
		var at, found, err = s.app.(runtime.Timekeeper).Due(s.sh, s.store)
		if err != nil {
			t.Fatal(err)
		}
		return found && at.IsZero()
	}
	// settle runs transactions of s, each with the next of msgs if any
	// is left, until its hand-off work is done and msgs are applied; and
	// then (a call before its transaction number at, if it runs that many).
	var settle = func(s *forkShard, msgs []*order, at int, then func()) {
		t.Helper()
		var dropped = -1 // As last reported, while dropping.
		var through = 0.0
		var _, sized = s.store.(runtime.RangeSizer)
		for txns := 0; len(msgs) != 0 || handingOff(s); txns++ {
			if txns == at && then != nil {
				then()
			}
			if txns == 10000 {
				t.Fatalf("shard %s still hands off after %d transactions", s.sh.spec.Id, txns)
			}
			var next = msgs[:min(len(msgs), 3)]
			msgs = msgs[len(next):]
			apply(s, s.own, next)
			// A drop reports what it deleted so far, which only grows.
			if st := rescaleState(t, s); st.Phase == runtime.RescaleDropping {
				if st.Dropped < dropped {
					t.Errorf("shard %s reports %d rows dropped after %d", s.sh.spec.Id, st.Dropped, dropped)
				}
				dropped = st.Dropped
				// It tells how far through its state it has gone, which
				// grows but for the rows its messages add after its place.
				switch {
				case !sized:
					// It can't tell, but once through all.
					if st.Through != -1 && st.Through != 1 {
						t.Errorf("shard %s, of a store that can't estimate sizes, is %v through", s.sh.spec.Id, st.Through)
					}
					unsizedDrops.Add(1)
				case st.Through < 0 || st.Through > 1 || len(next) == 0 && st.Through < through:
					t.Errorf("shard %s's drop is %v through after %v", s.sh.spec.Id, st.Through, through)
				}
				through = st.Through
			} else if st.Dropped != 0 || st.Through != 0 {
				t.Errorf("shard %s, not dropping: rescale state %+v", s.sh.spec.Id, st)
			}
		}
		if sized && dropped != -1 && through != 1 {
			t.Errorf("shard %s's drop ended %v through", s.sh.spec.Id, through)
		}
	}
	var feed = func(s *forkShard, p, count int) {
		var batch = msgs(p, count)
		apply(s, s.own, batch)
		for _, o := range batch {
			want[o.Customer] += o.Cents
		}
	}

	var shards []*forkShard
	for p := range n {
		shards = append(shards, open(p, family.journal(p), nil))
	}
	for _, k := range factors {
		var n = len(shards)
		var m = n * k
		var tails [][]*order    // Of each parent's journal, after its split.
		var splitAt []pb.Offset // Of each parent's journal.
		for p, s := range shards {
			feed(s, p, 20)
			feed(s, p, 20)
			// The split is asked: the next transaction applies every
			// message, then splits.
			s.sh.spec.LabelSet.SetValue(runtime.LabelSplitTo, strconv.Itoa(m))
			if batch != "" {
				s.sh.spec.LabelSet.SetValue(runtime.LabelSplitBatch, batch)
			}
			feed(s, p, 20)
			log.owns[s.sh.spec.Id] = runtime.Ownership{Index: p, Of: m}
			splitAt = append(splitAt, offset)
		}
		// The rescale's journals exist (producers still route by n).
		family.n = m

		var children = make([]*forkShard, m-n)
		// forkChildren forks the new shards of parent p, from a copy of
		// its files or from its store, once its split is committed.
		var forkChildren = func(p int) {
			t.Helper()
			var parent = shards[p]
			checkHidden(t, parent, m, p)
			for q := n + p; q < m; q += n {
				var child = open(q, family.journal(q), parent)
				child.sh.spec.LabelSet.SetValue(runtime.LabelSplitTo, strconv.Itoa(m))
				child.sh.spec.LabelSet.SetValue(runtime.LabelSplitFrom, parent.sh.spec.Id.String())
				if need, err := child.app.(runtime.Forker).NeedsFork(child.sh, child.store); err != nil || !need {
					t.Fatalf("NeedsFork: %t, %v", need, err)
				}
				if err := fork(child, parent); err != nil {
					t.Fatalf("forking shard %s from %s: %v", child.sh.spec.Id, parent.sh.spec.Id, err)
				}
				children[q-n] = child
			}
		}
		for p, s := range shards {
			// A parent's new shards fork as soon as its split is committed,
			// or later, as it goes on.
			var early, forked = rng.IntN(2) == 0, false
			var end = rng.IntN(2) == 0
			var then = func() {
				forkChildren(p)
				forked = true
				if end {
					// And its rescale may end then: it drops what it no
					// longer owns, as it goes on.
					s.sh.spec.LabelSet.Remove(runtime.LabelSplitTo)
					s.sh.spec.LabelSet.Remove(runtime.LabelSplitBatch) // As the command does: the shard recorded it.
				}
			}
			// Then producers on the old count go on writing to the
			// parent's journal: the parent applies those it owns, and
			// hides what it no longer owns.
			var tail = msgs(p, 30)
			if early {
				settle(s, tail, rng.IntN(12), then)
			} else {
				settle(s, tail, -1, nil)
			}
			for _, o := range tail {
				want[o.Customer] += o.Cents
			}
			tails = append(tails, tail)
			if !forked {
				forkChildren(p)
			}
		}
		routed = m

		for q := n; q < m; q++ {
			var p = q % n
			var parent, child = shards[p], children[q-n]
			var cp, err = child.store.RestoreCheckpoint(child.sh)
			if err != nil {
				t.Fatal(err)
			}
			if got := cp.Sources[parent.own].ReadThrough; got != splitAt[p] {
				t.Errorf("shard %s starts reading %s at %d, want %d (its parent's split)", child.sh.spec.Id, parent.own, got, splitAt[p])
			}
			// The child reads the parent's journals again from the split,
			// keeping what it owns.
			parentInherited, err := parent.app.(runtime.Forker).Inherited(parent.sh, parent.store)
			if err != nil {
				t.Fatal(err)
			}
			var want = slices.Sorted(slices.Values(append(slices.Clone(parentInherited), parent.own)))
			if got, err := child.app.(runtime.Forker).Inherited(child.sh, child.store); err != nil || !slices.Equal(got, want) {
				t.Errorf("shard %s inherits %v (%v), want %v", child.sh.spec.Id, got, err, want)
			}
			apply(child, parent.own, tails[p])
		}
		for _, s := range slices.Concat(shards, children) {
			// The rescale ends: shards drop their hand-off areas from
			// their next transaction on.
			s.sh.spec.LabelSet.Remove(runtime.LabelSplitTo)
			s.sh.spec.LabelSet.Remove(runtime.LabelSplitBatch) // As the command does: the shard recorded it.
			apply(s, s.own, nil)
			settle(s, nil, 0, nil)
			var handoff int
			_ = s.db.Snapshot().Scan([]byte(runtime.HandoffPrefix), keyenc.PrefixEnd([]byte(runtime.HandoffPrefix)), func([]byte, []byte) bool { handoff++; return true })
			if handoff != 0 {
				t.Errorf("shard %s keeps %d rows handed off after the rescale ended", s.sh.spec.Id, handoff)
			}
			if st := rescaleState(t, s); st.Phase != "" || st.Of != m || st.Index != log.owns[s.sh.spec.Id].Index {
				t.Errorf("shard %s, its rescale to %d done: rescale state %+v", s.sh.spec.Id, m, st)
			}
		}
		shards = append(shards, children...)
	}

	// Once everything fell due, every timer and row that expires not
	// replaced before it did has fired, once, on the shard owning its key
	// as it fired (which the handler checks), and the others never did.
	now = now.Add(time.Hour)
	for _, s := range shards {
		apply(s, s.own, nil)
		if err := s.db.Snapshot().Scan([]byte("\x01gazconsumer/"), []byte("\x01gazconsumer0"), func(key, _ []byte) bool {
			if !bytes.HasPrefix(key, []byte(runtime.PartitioningKey)) {
				t.Errorf("shard %s keeps %q after everything fell due", s.sh.spec.Id, key)
			}
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	for id, customer := range log.set {
		for kind, what := range []string{"timer", "expiry"} {
			var fired = log.fired[kind][id]
			if log.replaced[kind][id] && len(fired) != 0 {
				t.Errorf("the %s of order %d (%s) was replaced, but fired on %v", what, id, customer, fired)
			} else if !log.replaced[kind][id] && len(fired) != 1 {
				t.Errorf("the %s of order %d (%s) fired on %v, want once", what, id, customer, fired)
			}
		}
	}
	for kind := range log.fired {
		if len(log.fired[kind]) == 0 {
			t.Errorf("nothing of kind %d fired", kind)
		}
	}

	var all = map[string]int64{}
	for i, s := range shards {
		if err := s.db.Snapshot().Scan([]byte("c"), []byte("d"), func(key, value []byte) bool {
			if got := partition.Index(key, family.n); got != i {
				t.Errorf("shard %s holds %s, owned by %d", s.sh.spec.Id, key, got)
			}
			if _, ok := all[string(key)]; ok {
				t.Errorf("%s is held twice", key)
			}
			all[string(key)] = int64(binary.BigEndian.Uint64(value))
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(all) != len(want) {
		t.Errorf("%d keys held, want %d", len(all), len(want))
	}
	for c, cents := range want {
		if all[c] != cents {
			t.Errorf("%s: %d cents, want %d", c, all[c], cents)
		}
	}
}

// linkFixture is a parent shard of a rescale, of one partition of orders
// split in two, and the new shard linking its state, in memory.
type linkFixture struct {
	t      *testing.T
	family *orderFamily
	log    *timeLog
	offset pb.Offset
	parent *forkShard
}

func newLinkFixture(t *testing.T) *linkFixture {
	var f = &linkFixture{t: t, family: &orderFamily{n: 1}, log: newTimeLog(rand.New(rand.NewPCG(1, 2)))}
	f.parent = f.open(0, nil, func(o snapshotOpener) runtime.StoreOpener { return o })
	return f
}

// open opens shard index of the family's partitions, whose store links
// parent's files through the opener wrap returns.
func (f *linkFixture) open(index int, parent *mem.DB, wrap func(snapshotOpener) runtime.StoreOpener) *forkShard {
	var id = pc.ShardID(fmt.Sprintf("s-%02d", index))
	f.log.owns[id] = runtime.Ownership{Index: index, Of: f.family.n}
	var s = &forkShard{sh: &rescaleShard{spec: pc.ShardSpec{Id: id}}, db: mem.NewDB(), own: f.family.journal(index)}
	s.sh.spec.Sources = []pc.ShardSpec_Source{{Journal: s.own}}
	var a, err = runtime.NewAdapter(tally, tallyHandler{f.log}, wrap(snapshotOpener{s.db, parent}), f.family)
	if err != nil {
		f.t.Fatal(err)
	}
	s.app, s.store = a, mem.Open(s.db)
	return s
}

// txn runs a transaction of orders of customers, and starts its commit once
// appends resolves.
func (f *linkFixture) txn(s *forkShard, appends client.OpFuture, customers ...string) client.OpFuture {
	var bf = s.app.(runtime.BeginFinisher)
	if err := bf.BeginTxn(s.sh, s.store); err != nil {
		f.t.Fatal(err)
	}
	f.consume(s, customers...)
	if err := s.app.FinalizeTxn(s.sh, s.store, nil); err != nil {
		f.t.Fatal(err)
	}
	var cp = pc.Checkpoint{Sources: map[pb.Journal]pc.Checkpoint_Source{s.own: {ReadThrough: f.offset}}}
	return s.store.StartCommit(s.sh, cp, client.OpFutures{appends: {}})
}

// consume has s consume, in its transaction, an order of each of customers,
// read from its journal after the last.
func (f *linkFixture) consume(s *forkShard, customers ...string) {
	for _, c := range customers {
		f.offset += 10
		var env = message.Envelope{Journal: &pb.JournalSpec{Name: s.own, LabelSet: pb.MustLabelSet(labels.MessageType, "test.Order")},
			Begin: f.offset - 10, End: f.offset, Message: &order{Customer: c, Cents: 1}}
		if err := s.app.ConsumeMessage(s.sh, s.store, env, nil); err != nil {
			f.t.Fatal(err)
		}
	}
}

// split commits a first transaction of the parent, then starts the commit
// of its split, once appends resolves, and opens the new shard, whose
// store links the parent's files through the opener wrap returns.
func (f *linkFixture) split(appends client.OpFuture, wrap func(snapshotOpener) runtime.StoreOpener) (client.OpFuture, *forkShard) {
	if err := f.txn(f.parent, client.FinishedOperation(nil), "c-1", "c-2", "c-3").Err(); err != nil {
		f.t.Fatal(err)
	}
	f.parent.sh.spec.LabelSet.SetValue(runtime.LabelSplitTo, "2")
	var split = f.txn(f.parent, appends, "c-4")
	f.log.owns[f.parent.sh.spec.Id] = runtime.Ownership{Index: 0, Of: 2}
	f.family.n = 2

	var child = f.open(1, f.parent.db, wrap)
	child.sh.spec.LabelSet.SetValue(runtime.LabelSplitTo, "2")
	child.sh.spec.LabelSet.SetValue(runtime.LabelSplitFrom, f.parent.sh.spec.Id.String())
	return split, child
}

// finish forks child from the links of its parent's files, and finishes
// the parent's transaction.
func (f *linkFixture) finish(child *forkShard) {
	child.store = mem.Open(child.db)
	if ok, err := child.app.(runtime.LinkForker).ForkLinked(child.sh, child.store); err != nil || !ok {
		f.t.Fatalf("ForkLinked: %t, %v", ok, err)
	}
	if err := f.parent.app.(runtime.BeginFinisher).FinishTxn(f.parent.sh, f.parent.store, nil); err != nil {
		f.t.Fatal(err)
	}
}

// A new shard links its parent's files only once the parent's split is
// written to them: a split commit started (its writes read by ReadState),
// but not yet written, as it waits for its transaction's appends, holds
// the link off; once written, the linked state is split, and forks.
func TestLinkForkWaitsForTheSplitWrite(t *testing.T) {
	var f = newLinkFixture(t)
	var appends = client.NewAsyncOperation()
	var split, child = f.split(appends, func(o snapshotOpener) runtime.StoreOpener { return o })
	var lf = child.app.(runtime.LinkForker)
	var released, linked = make(chan struct{}), make(chan error, 1)
	go func() {
		linked <- lf.LinkFork(child.sh, f.parent.store, nil, func() { close(released); child.store.Destroy() })
	}()
	select {
	case <-released:
		t.Fatal("the child linked its parent's files before its split was written")
	case err := <-linked:
		t.Fatalf("LinkFork returned before the split was written: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	appends.Resolve(nil)
	if err := split.Err(); err != nil {
		t.Fatal(err)
	} else if err = <-linked; err != nil {
		t.Fatal(err)
	}
	f.finish(child)
}

// A parent's store which tells when its commits are written
// (runtime.WrittenStateReader) has the new shard link its files as its
// split commit goes on becoming durable: LinkFork returns only once it is,
// and fails if it fails.
func TestLinkForkLinksBeforeTheSplitIsDurable(t *testing.T) {
	for _, fail := range []bool{false, true} {
		var f = newLinkFixture(t)
		var linking = make(chan struct{}, 1)
		var split, child = f.split(client.FinishedOperation(nil), func(o snapshotOpener) runtime.StoreOpener {
			return notifyingLinker{o, linking}
		})
		if err := split.Err(); err != nil {
			t.Fatal(err)
		}
		var parent = &unsettledStore{Store: f.parent.store.(*mem.Store), settle: make(chan error, 1)}
		var linked = make(chan error, 1)
		go func() {
			linked <- child.app.(runtime.LinkForker).LinkFork(child.sh, parent, nil, func() { child.store.Destroy() })
		}()
		select {
		case <-linking:
		case err := <-linked:
			t.Fatalf("fail=%v: LinkFork returned before it linked, with the split not yet durable: %v", fail, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("fail=%v: the child did not link its parent's files while its split was written, not yet durable", fail)
		}
		select {
		case err := <-linked:
			t.Fatalf("fail=%v: LinkFork returned before the split was durable: %v", fail, err)
		case <-time.After(30 * time.Millisecond):
		}
		if fail {
			parent.settle <- errors.New("log append failed")
			if err := <-linked; err == nil || !strings.Contains(err.Error(), "did not commit") || !strings.Contains(err.Error(), "log append failed") {
				t.Fatalf("LinkFork, once the split failed to be durable: %v", err)
			}
			continue
		}
		parent.settle <- nil
		if err := <-linked; err != nil {
			t.Fatal(err)
		}
		f.finish(child)
	}
}

// notifyingLinker tells linking as it links a parent's files.
type notifyingLinker struct {
	snapshotOpener
	linking chan<- struct{}
}

func (o notifyingLinker) LinkFiles(ctx context.Context, parent runtime.Store, rec runtime.Recorder) error {
	o.linking <- struct{}{}
	return o.snapshotOpener.LinkFiles(ctx, parent, rec)
}

// unsettledStore is a store whose commits read by ReadWritten are durable
// once settle is sent their outcome.
type unsettledStore struct {
	*mem.Store
	settle chan error
}

func (s *unsettledStore) ReadWritten(ctx context.Context, settled []byte, fn func(runtime.Reader) error) (func(context.Context) error, error) {
	var durable, err = s.Store.ReadWritten(ctx, settled, fn)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		if err := durable(ctx); err != nil {
			return err
		}
		return <-s.settle
	}, nil
}
