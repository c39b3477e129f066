// Package consumertest runs a consumer's handlers in unit tests, in the
// transactions the runtime runs them in, without etcd, brokers or RocksDB:
// on an in-memory store (store/mem) and in-memory journals.
//
// A Harness drives the runtime's own transaction code, runtime/txn's
// Pipeline, over the consumer's generated Application: messages a test
// feeds to the consumer's journals are read, sequenced by runtime/sequence's
// Sequencer, as a member's are (so that duplicates, transactions awaiting
// their acknowledgements and messages of other partitions behave as in
// production), and consumed in transactions whose commits write the
// store's checkpoint and acknowledge what they published. Commit runs one
// transaction over every message fed since the last; Crash runs one up to
// its commit, then fails the shard, which a new store resumes from the last
// checkpoint committed, as a member taking the shard over would.
//
// protoc-gen-gazconsumer generates a typed harness of each consumer, in a
// package of its own beside the consumer's generated package (for consumer
// SpendCounter, package spendcountertest), so that production binaries never
// import package testing. Its New wraps a Harness with typed feeds, tables
// (Table) and published messages (Published):
//
//	h := spendcountertest.New(t, spendcounter.NewSpendCounterHandler())
//	h.Order(&shopv1.Order{CustomerId: "c1", Cents: 250})
//	h.Commit()
//	h.Spend.Expect(&shopv1.Spend{CustomerId: "c1", Cents: 250})
//	h.Published.Total.Expect(&shopv1.Total{CustomerId: "c1", Cents: 250})
package consumertest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
	"github.com/gazconsumer/gazconsumer/runtime/sequence"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	"github.com/gazconsumer/gazconsumer/runtime/txn"
	"github.com/gazconsumer/gazconsumer/store/mem"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Consumer describes a consumer to New. Generated harnesses fill it in from
// the consumer's annotations.
type Consumer struct {
	// Name of the consumer: its service's protobuf full name. It is the ID
	// of the harness's shard.
	Name string
	// NewApplication returns the consumer's Application, whose stores are
	// opened by stores and whose published messages are routed among the
	// journals journals lists, as the generated New…Application does.
	NewApplication func(stores runtime.StoreOpener, journals runtime.PartitionLister) (runtime.Application, error)
	// Inputs are the journal messages the consumer reads.
	Inputs []Input
	// Outputs are the journal messages the consumer publishes.
	Outputs []Output
}

// Input is a type of journal message a consumer reads, from partition
// journals of the type's own.
type Input struct {
	// New returns a new message of the type. Messages fed to the harness
	// are routed to the type's journals by their Go type.
	New func() message.Message
	// MessageType and ContentType are the labels of the type's journals:
	// app.gazette.dev/message-type, and the content-type of its framing.
	MessageType, ContentType string
	// PartitionKey, if not nil, writes the partition key of a message of
	// the type, by which it is routed among the partitions as a publisher
	// of the type routes it. Messages of a type without a partition key all
	// go to one partition.
	PartitionKey message.MappingKeyFunc
}

// Output is a type of journal message a consumer publishes.
type Output struct {
	// New returns a new message of the type.
	New func() message.Message
	// MessageType is the type's app.gazette.dev/message-type, and
	// ContentType the content-type of its framing.
	MessageType, ContentType string
	// Selector selects the journals the consumer publishes messages of the
	// type to, as its annotation gives it. The harness creates partitions
	// it selects.
	Selector string
	// UUIDField names the field of the message holding its UUID, which
	// Published.Expect ignores.
	UUIDField protoreflect.Name
}

// InputOf returns the Input of messages *M, of journals labeled messageType
// and contentType, as generated harnesses describe their consumer's inputs.
// If *M has an AppendPartitionKey method (a generated journal message with a
// partition key), messages are routed by the key it appends.
func InputOf[M any, PM interface {
	*M
	message.Message
}](messageType, contentType string) Input {
	var in = Input{New: func() message.Message { return PM(new(M)) }, MessageType: messageType, ContentType: contentType}
	if _, ok := any(PM(nil)).(partition.Keyed); ok {
		in.PartitionKey = partition.KeyOf
	}
	return in
}

// OutputOf returns the Output of messages *M, of journals labeled
// messageType and contentType and selected by selector, whose UUID is in
// field uuidField, as generated harnesses describe their consumer's
// outputs.
func OutputOf[M any, PM interface {
	*M
	message.Message
}](messageType, contentType, selector string, uuidField protoreflect.Name) Output {
	return Output{New: func() message.Message { return PM(new(M)) }, MessageType: messageType, ContentType: contentType,
		Selector: selector, UUIDField: uuidField}
}

// Option is an option of New.
type Option func(*options)

type options struct {
	partitions int
}

// Partitions sets the number of partition journals of each type of message
// read or published by the consumer; the default is 2.
func Partitions(n int) Option { return func(o *options) { o.partitions = max(n, 1) } }

// Harness runs a consumer's shard in memory. Its methods are called from
// the test's goroutine.
type Harness struct {
	t        testing.TB
	consumer Consumer
	app      runtime.Application
	journals *journals
	inputs   map[reflect.Type]*inputFamily
	outputs  map[reflect.Type]*outputFamily
	spec     *pc.ShardSpec
	db       *mem.DB
	dir      string

	clock  *clock                // Of the shard's transactions.
	feeder *client.AppendService // Appends the test's messages.
	feed   *Producer             // Of Feed.
	held   map[pb.Journal]bool
	shard  *shard // The shard as a member now runs it.
}

// inputFamily is an input and its partitions.
type inputFamily struct {
	Input
	partitions []pb.Journal
	mapping    message.MappingFunc
}

// outputFamily is an output and its partitions.
type outputFamily struct {
	Output
	partitions []pb.Journal
}

// Appended locates a message (or several) appended to a journal.
type Appended struct {
	// Journal appended to.
	Journal pb.Journal
	// Begin and End are the offsets of the append's first byte and of the
	// byte following its last.
	Begin, End pb.Offset
}

// runTimeout bounds a transaction of the harness.
const runTimeout = time.Minute

// New returns a Harness running the shard of consumer c, reading the
// partitions of every input, with an empty store. It fails t if the
// consumer's Application cannot be built. The harness is stopped when t
// ends.
func New(t testing.TB, c Consumer, opts ...Option) *Harness {
	t.Helper()
	var o = options{partitions: 2}
	for _, opt := range opts {
		opt(&o)
	}
	var h = &Harness{
		t:        t,
		consumer: c,
		journals: newJournals(),
		inputs:   make(map[reflect.Type]*inputFamily),
		outputs:  make(map[reflect.Type]*outputFamily),
		spec:     &pc.ShardSpec{Id: pc.ShardID(c.Name)},
		clock:    &clock{now: Epoch},
		db:       mem.NewDB(),
		dir:      t.TempDir(),
		held:     make(map[pb.Journal]bool),
	}
	var names = make(map[string]bool) // Of journal families.
	for _, in := range c.Inputs {
		var fam = &inputFamily{Input: in}
		var set = pb.MustLabelSet(labels.MessageType, in.MessageType, labels.ContentType, in.ContentType)
		fam.partitions = h.createPartitions("in/"+in.MessageType, names, o.partitions, set)
		var parts = h.journals.list(fam.partitions, pb.LabelSelector{})
		var key = in.PartitionKey
		if key == nil {
			// One partition for all, that the test's reads are deterministic
			// (a publisher would spread them at random).
			key = func(message.Mappable, io.Writer) {}
		}
		fam.mapping = partition.Mapping(key, func() *pb.ListResponse { return parts })
		h.inputs[reflect.TypeOf(in.New())] = fam
		for _, j := range fam.partitions {
			h.spec.Sources = append(h.spec.Sources, pc.ShardSpec_Source{Journal: j})
		}
	}
	slices.SortFunc(h.spec.Sources, func(a, b pc.ShardSpec_Source) int { return cmp.Compare(a.Journal, b.Journal) })
	h.journals.create(pb.JournalSpec{Name: DeadLetterJournal, Replication: 1,
		LabelSet: pb.MustLabelSet(labels.ContentType, labels.ContentType_JSONLines)})
	h.spec.LabelSet.AddValue(source.LabelDeadLetterJournal, DeadLetterJournal.String())
	for _, out := range c.Outputs {
		var sel, err = pb.ParseLabelSelector(out.Selector)
		if err != nil {
			t.Fatalf("consumertest: output %s: %v", out.MessageType, err)
		}
		var set pb.LabelSet
		for _, l := range sel.Include.Labels {
			if l.Value == "" {
				l.Value = "consumertest" // The selector asks for the label, of any value.
			}
			if set.ValueOf(l.Name) == "" {
				set.AddValue(l.Name, l.Value)
			}
		}
		for _, l := range []pb.Label{{Name: labels.MessageType, Value: out.MessageType}, {Name: labels.ContentType, Value: out.ContentType}} {
			if set.ValueOf(l.Name) == "" {
				set.AddValue(l.Name, l.Value)
			}
		}
		var fam = &outputFamily{Output: out}
		fam.partitions = h.createPartitions("out/"+out.MessageType, names, o.partitions, set)
		if got := h.journals.list(fam.partitions, sel); len(got.Journals) != len(fam.partitions) {
			t.Fatalf("consumertest: output %s: no journal labeled %v is selected by %s", out.MessageType, set, out.Selector)
		}
		h.outputs[reflect.TypeOf(out.New())] = fam
	}

	var stores = runtime.StoreOpenerFunc(func(runtime.Shard, runtime.Recorder) (runtime.Store, error) {
		return mem.Open(h.db), nil
	})
	var lister = runtime.PartitionListerFunc(func(sel pb.LabelSelector) message.PartitionsFunc {
		var parts = h.outputPartitions(sel)
		return func() *pb.ListResponse { return parts }
	})
	var err error
	if h.app, err = c.NewApplication(stores, lister); err != nil {
		t.Fatalf("consumertest: building consumer %s: %v", c.Name, err)
	}
	if d, ok := h.app.(runtime.ShardDefaulter); ok {
		runtime.CompleteShardSpec(h.spec, d.ShardDefaults())
	}
	// Transactions end when their reads do: the durations only inform
	// handlers which read the spec.
	runtime.CompleteShardSpec(h.spec, pc.ShardSpec{MaxTxnDuration: time.Second})

	var feedCtx, cancel = context.WithCancel(context.Background())
	h.feeder = client.NewAppendService(feedCtx, h.journals)
	h.feed = h.NewProducer()
	if h.shard, err = h.start(); err != nil {
		cancel()
		t.Fatalf("consumertest: starting shard %s: %v", h.spec.Id, err)
	}
	t.Cleanup(func() {
		h.shard.stop()
		cancel()
	})
	return h
}

// createPartitions creates n journals family/part-000, ... labeled set,
// where family is not yet taken by another type (else it is suffixed).
func (h *Harness) createPartitions(family string, taken map[string]bool, n int, set pb.LabelSet) []pb.Journal {
	var name = family
	for i := 2; taken[name]; i++ {
		name = fmt.Sprintf("%s.%d", family, i)
	}
	taken[name] = true
	var out []pb.Journal
	for i := range n {
		var j = pb.Journal(fmt.Sprintf("%s/part-%03d", name, i))
		h.journals.create(pb.JournalSpec{Name: j, Replication: 1, LabelSet: set})
		out = append(out, j)
	}
	return out
}

// outputPartitions lists the partitions of outputs that sel selects: the
// brokers of a consumer under test hold its outputs only.
func (h *Harness) outputPartitions(sel pb.LabelSelector) *pb.ListResponse {
	var all []pb.Journal
	for _, fam := range h.outputs {
		all = append(all, fam.partitions...)
	}
	return h.journals.list(all, sel)
}

// Spec returns the spec of the harness's shard: it reads every partition of
// every input, with the consumer's shard defaults.
func (h *Harness) Spec() *pc.ShardSpec { return h.spec }

// Feed appends msg, committed (as a message published outside of a
// transaction), to the partition of its type that its partition key maps it
// to, for the next transaction to consume. It fails the test if the
// consumer doesn't read messages of msg's type.
func (h *Harness) Feed(msg message.Message) Appended {
	h.t.Helper()
	return h.feed.publish(msg, true)
}

// Producer publishes messages to the consumer's inputs within
// transactions, as another consumer does: they're read only once the
// producer commits them, and never if it doesn't.
type Producer struct {
	h   *Harness
	pub *message.Publisher
}

// NewProducer returns a Producer of its own: its messages have a producer ID
// of their own.
func (h *Harness) NewProducer() *Producer {
	return &Producer{h: h, pub: message.NewPublisher(h.feeder, nil)}
}

// Publish appends msg within the producer's transaction to the partition
// of its type that its partition key maps it to. It fails the test if the
// consumer doesn't read messages of msg's type.
func (p *Producer) Publish(msg message.Message) Appended {
	p.h.t.Helper()
	return p.publish(msg, false)
}

func (p *Producer) publish(msg message.Message, committed bool) Appended {
	p.h.t.Helper()
	var fam = p.h.inputs[reflect.TypeOf(msg)]
	if fam == nil {
		p.h.t.Fatalf("consumertest: consumer %s reads no message of type %T", p.h.consumer.Name, msg)
	}
	var aa *client.AsyncAppend
	var err error
	if committed {
		aa, err = p.pub.PublishCommitted(fam.mapping, msg)
	} else {
		aa, err = p.pub.PublishUncommitted(fam.mapping, msg)
	}
	if err == nil {
		err = aa.Err()
	}
	if err != nil {
		p.h.t.Fatalf("consumertest: publishing %T: %v", msg, err)
	}
	var frag = aa.Response().Commit
	return Appended{Journal: frag.Journal, Begin: frag.Begin, End: frag.End}
}

// Commit appends the acknowledgements of the messages the producer
// published since its last Commit, which commits them: the consumer's next
// transaction reads them. It returns where the acknowledgements are.
func (p *Producer) Commit() []Appended {
	p.h.t.Helper()
	var intents, err = p.pub.BuildAckIntents()
	if err != nil {
		p.h.t.Fatalf("consumertest: building acknowledgements: %v", err)
	}
	var out []Appended
	for _, intent := range intents {
		var aa = p.h.feeder.StartAppend(pb.AppendRequest{Journal: intent.Journal}, nil)
		_, _ = aa.Writer().Write(intent.Intent)
		if err = aa.Release(); err == nil {
			err = aa.Err()
		}
		if err != nil {
			p.h.t.Fatalf("consumertest: acknowledging to %s: %v", intent.Journal, err)
		}
		var frag = aa.Response().Commit
		out = append(out, Appended{Journal: frag.Journal, Begin: frag.Begin, End: frag.End})
	}
	return out
}

// Redeliver appends again the content a located, as a producer retrying an
// append whose success it didn't learn does: the consumer must not consume
// its messages twice. It returns where the copy is.
func (h *Harness) Redeliver(a Appended) Appended {
	h.t.Helper()
	var _, content = h.journals.content(a.Journal)
	if a.Begin < 0 || a.End > pb.Offset(len(content)) || a.Begin > a.End {
		h.t.Fatalf("consumertest: redelivering [%d, %d) of %s, which holds %d bytes", a.Begin, a.End, a.Journal, len(content))
	}
	var begin, end, _ = h.journals.append(a.Journal, content[a.Begin:a.End])
	return Appended{Journal: a.Journal, Begin: begin, End: end}
}

// Hold holds back the reads of the partitions journals: transactions don't
// read what is appended to them until they are released, as if their
// readers lagged behind those of other partitions.
func (h *Harness) Hold(journals ...pb.Journal) {
	for _, j := range journals {
		h.held[j] = true
	}
}

// Release releases partitions held by Hold: the next transaction reads
// what was appended to them, in the order it was appended among the
// messages of other partitions still unread.
func (h *Harness) Release(journals ...pb.Journal) {
	for _, j := range journals {
		delete(h.held, j)
	}
}

// Commit runs one transaction of the shard over every message appended to
// its partitions since the last transaction read them (but those held), as
// the runtime runs it, and waits until it is committed and acknowledged.
// The transaction also fires what is due by the harness's clock (see
// Advance). It returns the transaction's Stats, which are zero if there was
// nothing to consume or fire. It fails the test if the shard fails.
func (h *Harness) Commit() txn.Stats {
	h.t.Helper()
	var st, err = h.TryCommit()
	if err != nil {
		h.t.Fatalf("consumertest: %v", err)
	}
	return st
}

// TryCommit is Commit, but returns the error of a shard that failed (of a
// handler, typically) rather than failing the test. The failed shard is
// started again from its last checkpoint, as a member taking it over would,
// and its next transaction reads the messages of the failed one again.
func (h *Harness) TryCommit() (txn.Stats, error) {
	h.t.Helper()
	var s = h.shard
	var ctx, cancel = context.WithTimeout(s.ctx, runTimeout)
	defer cancel()
	s.committed = s.committed[:0]
	var err = s.pipeline.Run(ctx, s.acks, h.reads(s))
	if err != nil {
		h.restart()
		return txn.Stats{}, fmt.Errorf("shard %s: %w", h.spec.Id, err)
	}
	s.acks = pc.Checkpoint{} // Written by this run.
	if n := len(s.committed); n != 0 {
		return s.committed[n-1], nil
	}
	return txn.Stats{}, nil
}

// Crash runs a transaction as Commit does, through its FinalizeTxn and the
// appends of the messages it published, and crashes the shard before its
// commit is durable: the transaction is lost. The shard is started again, as
// a member taking it over would: on a new store of the last checkpoint
// committed, reading its partitions from the checkpoint's offsets, and
// sending again the acknowledgements of the last transaction committed. The
// next transaction consumes the lost one's messages again; the lost one's
// effects on the store never were, and its published messages are never
// read, as they were never acknowledged. It fails the test if the shard
// fails before its commit.
func (h *Harness) Crash() {
	h.t.Helper()
	var s = h.shard
	var crash = &crashPoint{gate: client.NewAsyncOperation(), appends: make(chan client.OpFutures, 1)}
	s.crash = crash
	var ctx, cancel = context.WithTimeout(s.ctx, runTimeout)
	defer cancel()
	var done = make(chan error, 1)
	go func() { done <- s.pipeline.Run(ctx, s.acks, h.reads(s)) }()

	var err error
	select {
	case appends := <-crash.appends:
		// The commit waits for the appends of the transaction, and for the
		// gate, which never opens: let the appends land, then crash.
		for f := range appends {
			select {
			case <-f.Done():
			case <-ctx.Done():
			}
		}
		cancel()
		if err = <-done; errors.Is(err, context.Canceled) {
			err = nil
		}
	case err = <-done:
		// There was no transaction to crash, or it failed first.
	}
	h.restart()
	if err != nil {
		h.t.Fatalf("consumertest: shard %s failed before it crashed: %v", h.spec.Id, err)
	}
}

// crashPoint is where Crash stops a transaction: at its commit, which waits
// for gate.
type crashPoint struct {
	gate    *client.AsyncOperation // Never resolved.
	appends chan client.OpFutures  // Receives the transaction's appends.
}

// restart stops the shard, and starts it again from its last checkpoint.
func (h *Harness) restart() {
	h.t.Helper()
	h.shard.stop()
	var err error
	if h.shard, err = h.start(); err != nil {
		h.t.Fatalf("consumertest: restarting shard %s: %v", h.spec.Id, err)
	}
}

// reads returns a closed queue of the reads of s's partitions appended since
// the last transaction, in the order they were appended.
func (h *Harness) reads(s *shard) *txn.Queue {
	type sequenced struct {
		txn.Read
		seq int64
	}
	var all []sequenced
	for _, src := range h.spec.Sources {
		var r = s.readers[src.Journal]
		if h.held[src.Journal] || r == nil {
			continue
		}
		for {
			var env, err = r.next()
			if errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				// As a shard's reader, stop reading the journal at the error,
				// which fails the shard.
				delete(s.readers, src.Journal)
				all = append(all, sequenced{txn.Read{Err: fmt.Errorf("reading journal %s: %w", src.Journal, err)}, math.MaxInt64})
				break
			}
			all = append(all, sequenced{txn.Read{Env: env}, h.journals.seqOf(src.Journal, env.Begin)})
		}
	}
	slices.SortStableFunc(all, func(a, b sequenced) int { return cmp.Compare(a.seq, b.seq) })
	var q = txn.NewQueue(len(all) + 1)
	for _, r := range all {
		_ = q.Put(context.Background(), r.Read) // Never waits: the queue holds them all.
	}
	q.Close()
	return q
}

// Checkpoint returns the checkpoint last committed by the shard.
func (h *Harness) Checkpoint() pc.Checkpoint {
	h.t.Helper()
	var cp, err = h.db.Snapshot().Checkpoint()
	if err != nil {
		h.t.Fatalf("consumertest: %v", err)
	}
	return cp
}

// State returns a read-only view of the shard's store as last committed.
func (h *Harness) State() runtime.KV { return h.db.Snapshot() }

// shard is the harness's shard as a member runs it, from opening its store
// until it fails or is stopped.
type shard struct {
	h        *Harness
	ctx      context.Context
	cancel   context.CancelFunc
	ajc      *client.AppendService
	store    runtime.Store
	pipeline *txn.Pipeline
	readers  map[pb.Journal]*reader // Of each source, past the reads taken.
	// acks is the checkpoint whose acknowledgements the next run of the
	// pipeline writes first: the restored one, or none once written.
	acks      pc.Checkpoint
	crash     *crashPoint // Set by Crash.
	committed []txn.Stats // By the current run.
}

var _ runtime.Shard = (*shard)(nil)

// defaultRingBufferSize is the Sequencer's ring, as runtime/replica's.
const defaultRingBufferSize = 8192

// start opens the shard's store, restores its checkpoint, and readies the
// pipeline of its transactions, as runtime/replica does for a primary.
func (h *Harness) start() (*shard, error) {
	var s = &shard{h: h, readers: make(map[pb.Journal]*reader)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.ajc = client.NewAppendService(s.ctx, h.journals)
	var store, err = h.app.NewStore(s, dirRecorder(h.dir))
	if err != nil {
		s.cancel()
		return nil, fmt.Errorf("opening store: %w", err)
	}
	s.store = store
	var cp pc.Checkpoint
	if cp, err = store.RestoreCheckpoint(s); err != nil {
		s.stop()
		return nil, fmt.Errorf("restoring checkpoint: %w", err)
	}
	s.acks = cp
	for _, src := range h.spec.Sources {
		var offset = max(cp.Sources[src.Journal].ReadThrough, src.MinOffset)
		if s.readers[src.Journal], err = h.journals.newReader(src.Journal, offset, -1, h.app.NewMessage); err != nil {
			s.stop()
			return nil, err
		}
	}
	s.pipeline = &txn.Pipeline{
		Shard:     s,
		Store:     store,
		App:       h.app,
		Publisher: message.NewPublisher(s.ajc, nil),
		Sequencer: sequence.New(pc.FlattenReadThrough(cp), pc.FlattenProducerStates(cp), defaultRingBufferSize),
		Replay: func(journal pb.Journal, begin, end pb.Offset) message.Iterator {
			var r, err = h.journals.newReader(journal, begin, end, h.app.NewMessage)
			if err != nil {
				return message.IteratorFunc(func() (message.Envelope, error) { return message.Envelope{}, err })
			}
			return message.IteratorFunc(r.next)
		},
		Pending: func() client.OpFutures {
			var fs = s.ajc.PendingExcept("")
			if s.crash != nil {
				s.crash.appends <- maps.Clone(fs)
				fs[s.crash.gate] = struct{}{}
			}
			return fs
		},
		Clock: h.clock,
		Sleep: func(_ context.Context, d time.Duration) error {
			h.clock.advance(d) // A retry's backoff passes at once.
			return nil
		},
		Skip: func(env message.Envelope, cause error, pub *message.Publisher) error {
			return source.Skip(h.spec, env, cause, pub)
		},
		MaxDuration:          h.spec.MaxTxnDuration,
		WaitForAck:           !h.spec.DisableWaitForAck,
		ProducerPruneHorizon: 24 * time.Hour,
		Committed:            func(st txn.Stats) { s.committed = append(s.committed, st) },
	}
	return s, nil
}

// stop destroys the store, abandoning a commit in flight, and the shard's
// appends.
func (s *shard) stop() {
	s.store.Destroy()
	s.cancel()
}

// Context is cancelled when the shard stops.
func (s *shard) Context() context.Context { return s.ctx }

// Spec is the harness's spec.
func (s *shard) Spec() *pc.ShardSpec { return s.h.spec }

// Assignment is empty: no allocator assigned the shard.
func (s *shard) Assignment() keyspace.KeyValue { return keyspace.KeyValue{} }

// JournalClient is the shard's, over the harness's journals.
func (s *shard) JournalClient() client.AsyncJournalClient { return s.ajc }

// dirRecorder is the Recorder of a shard without a recovery log.
type dirRecorder string

func (d dirRecorder) Dir() string { return string(d) }

// Epoch is the time of the clock of a new Harness.
var Epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// clock is the txn.Clock of the harness. Its transactions close when their
// reads do, and not at a time: its timers of positive durations never fire
// (and those of others fire at once), so that a transaction lasts at least
// nothing and at most forever. Its time starts at Epoch, and moves only as
// the test advances it, or as a retry's backoff passes.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

// Now returns the clock's time.
func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// advance moves the clock's time forward by d.
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Timer returns a timer which never fires if d is positive, else at once.
func (*clock) Timer(d time.Duration) (<-chan time.Time, func()) {
	if d > 0 {
		return nil, func() {}
	}
	var ch = make(chan time.Time, 1)
	ch <- time.Time{}
	return ch, func() {}
}

// Now returns the time of the harness's clock: Epoch, as advanced since.
func (h *Harness) Now() time.Time { return h.clock.Now() }

// Sleep moves the harness's clock forward by d without running a
// transaction: the next Commit, Crash or Advance fires what fell due.
func (h *Harness) Sleep(d time.Duration) {
	h.t.Helper()
	if d < 0 {
		h.t.Fatalf("consumertest: Sleep(%v): time does not go back", d)
	}
	h.clock.advance(d)
}

// Advance moves the harness's clock forward by d, and runs a transaction
// as Commit does: it fires what fell due by the clock's new time (rows of
// tables whose TTL ran out) and consumes the messages fed since the last
// transaction, in one transaction. It returns the transaction's Stats
// (Fired counts what fired). It fails the test if the shard fails.
func (h *Harness) Advance(d time.Duration) txn.Stats {
	h.t.Helper()
	if d < 0 {
		h.t.Fatalf("consumertest: Advance(%v): time does not go back", d)
	}
	h.clock.advance(d)
	return h.Commit()
}

// DeadLetterJournal is the dead-letter journal of a Harness's shard (its
// label gazconsumer.dev/dead-letter-journal): messages whose handlers fail
// under a failure policy recording dead letters are recorded into it.
const DeadLetterJournal pb.Journal = "consumertest/dead-letters"

// DeadLetters returns the records of the messages the shard recorded into
// its dead-letter journal, committed, in the order it recorded them: those
// whose handlers failed under a failure policy recording dead letters.
func (h *Harness) DeadLetters() []source.Skipped {
	h.t.Helper()
	var envs, err = h.committed(DeadLetterJournal, func() message.Message { return new(source.Skipped) })
	if err != nil {
		h.t.Fatalf("consumertest: reading %s: %v", DeadLetterJournal, err)
	}
	var out = make([]source.Skipped, len(envs))
	for i, env := range envs {
		out[i] = *env.Message.(*source.Skipped)
		out[i].UUID = message.UUID{}
	}
	return out
}
