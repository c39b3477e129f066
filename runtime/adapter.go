package runtime

import (
	"fmt"
	"reflect"
	"sync"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/proto"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
)

// MessageType is a type of journal message: what journals labeled with its
// name hold.
type MessageType struct {
	// Name is the value of the journals' "app.gazette.dev/message-type"
	// label.
	Name string
	// ContentType is the content type of the type's framing, which the
	// journals' "content-type" label must be.
	ContentType string
	// New returns a new message of the type.
	New func() message.Message
}

// JournalType returns the MessageType of messages *M, named name and framed
// as contentType.
func JournalType[M any, PM interface {
	*M
	message.Message
}](name, contentType string) MessageType {
	return MessageType{Name: name, ContentType: contentType, New: func() message.Message { return PM(new(M)) }}
}

// MessageTypes picks the type of the messages of a journal by its labels,
// among a set of types: those of a Go package, or those a consumer reads.
type MessageTypes struct {
	of    string // Names the set in errors.
	types map[string]MessageType
}

// NewMessageTypes returns the set of types, named `of` in errors. It panics
// if two types share a name.
func NewMessageTypes(of string, types ...MessageType) MessageTypes {
	var t = MessageTypes{of: of, types: make(map[string]MessageType, len(types))}
	for _, mt := range types {
		if _, ok := t.types[mt.Name]; ok {
			panic(fmt.Sprintf("runtime: message type %q is twice among those of %s", mt.Name, of))
		}
		t.types[mt.Name] = mt
	}
	return t
}

// New returns a new message of the type named by the journal's
// "app.gazette.dev/message-type" label. It fails if the label is missing or
// names no type of the set, or if the journal's "content-type" label is not
// the type's framing.
func (t MessageTypes) New(spec *pb.JournalSpec) (message.Message, error) {
	var mt, err = t.typeOf(spec)
	if err != nil {
		return nil, err
	}
	return mt.New(), nil
}

// Constructor returns the constructor of the messages of the journal, or
// the error New would return.
func (t MessageTypes) Constructor(spec *pb.JournalSpec) (func() message.Message, error) {
	var mt, err = t.typeOf(spec)
	if err != nil {
		return nil, err
	}
	return mt.New, nil
}

// typeOf returns the type of the messages of the journal.
func (t MessageTypes) typeOf(spec *pb.JournalSpec) (MessageType, error) {
	var name = spec.LabelSet.ValueOf(labels.MessageType)
	var mt, ok = t.types[name]
	switch {
	case name == "":
		return mt, fmt.Errorf("journal %s has no label %s", spec.Name, labels.MessageType)
	case !ok:
		return mt, fmt.Errorf("journal %s: label %s=%q names no journal message of %s", spec.Name, labels.MessageType, name, t.of)
	}
	if ct := spec.LabelSet.ValueOf(labels.ContentType); ct != mt.ContentType {
		return mt, fmt.Errorf("journal %s: label %s=%q, but messages of type %s are framed as %q",
			spec.Name, labels.ContentType, ct, name, mt.ContentType)
	}
	return mt, nil
}

// Txn is what the transaction of every generated consumer holds: its
// …Txn type embeds a Txn beside its tables, and has a typed Publish… method
// for each message it publishes. Handlers of a shard share one Txn for the
// whole transaction, set anew for each call: a handler may not keep it past
// its return.
type Txn struct {
	// Shard being consumed.
	Shard Shard
	// Store of the shard.
	Store Store
	// Envelope of the message being handled; zero-valued in FinalizeTxn.
	Envelope message.Envelope

	pub     *message.Publisher
	held    []heldMessage   // Published by a call under a failure policy, until it returns.
	hold    bool            // Hold what is published, in held.
	outputs []mapping       // Of the consumer.
	now     time.Time       // Of the transaction: see Now.
	name    string          // Of the consumer.
	guard   *partitionGuard // Of the shard's store, if it has tables; set by BeginTxn.
}

// Txner is implemented by the transactions of generated consumers, which
// embed a Txn.
type Txner interface {
	txn() *Txn
}

func (tx *Txn) txn() *Txn { return tx }

// Now returns the time of the transaction: of the shard's clock as it began
// (or as it fired what fell due, before it finalized). Rows of tables that
// expire are dated by it. It is the zero time under a pipeline that tells
// no time.
func (tx *Txn) Now() time.Time { return tx.now }

// Publish publishes msg within the transaction to the partition journal
// that its type's mapping picks, among those its type's Output selects.
// Readers see it once the transaction commits, exactly once. msg must be of
// a type the consumer publishes.
//
// Under a failure policy that retries or records dead letters, the
// transaction holds a copy of msg until the handler returns, and publishes
// it only if the handler succeeds: msg may be changed after, and its UUID is
// not set.
func (tx *Txn) Publish(msg message.Message) error {
	var typ = reflect.TypeOf(msg)
	for i := range tx.outputs {
		if m := &tx.outputs[i]; m.typ == typ {
			if tx.hold {
				tx.held = append(tx.held, heldMessage{m, cloneMessage(msg)})
				return nil
			}
			if _, err := tx.pub.PublishUncommitted(m.mapping, msg); err != nil {
				return fmt.Errorf("publishing %s: %w", m.name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("consumer %s publishes no message of type %T", tx.name, msg)
}

// heldMessage is a message published by a handler call under a failure
// policy, held until the call returns.
type heldMessage struct {
	m   *mapping
	msg message.Message
}

// cloneMessage returns a copy of msg, a protobuf message, or msg itself.
func cloneMessage(msg message.Message) message.Message {
	if pm, ok := msg.(proto.Message); ok {
		if c, ok := proto.Clone(pm).(message.Message); ok {
			return c
		}
	}
	return msg
}

// flush publishes what the handler call published, now that it succeeded.
func (tx *Txn) flush() error {
	var held = tx.held
	tx.held, tx.hold = tx.held[:0], false
	for i, h := range held {
		held[i] = heldMessage{}
		if _, err := tx.pub.PublishUncommitted(h.m.mapping, h.msg); err != nil {
			return fmt.Errorf("publishing %s: %w", h.m.name, err)
		}
	}
	return nil
}

// drop drops what a failed handler call published.
func (tx *Txn) drop() {
	clear(tx.held)
	tx.held, tx.hold = tx.held[:0], false
}

// Input is a type of journal message a consumer reads, and its handler.
type Input[H any, T Txner] struct {
	MessageType
	// Method is the name of the rpc handling the messages, which names
	// the handler in errors.
	Method string

	typ      reflect.Type
	handle   func(H, T, message.Message) error
	policy   *FailurePolicy                   // Of the rpc, if annotated: in place of the consumer's.
	prefetch func(message.Message, *Prefetch) // Of ReadsAhead, if any.
}

// OnFailure returns in with the failure policy p of its rpc, which applies
// in place of the consumer's.
func (in Input[H, T]) OnFailure(p FailurePolicy) Input[H, T] {
	in.policy = &p
	return in
}

// Handle returns the Input of messages *M, named messageType and framed as
// contentType, which the rpc `method` of the consumer handles by calling
// handle (a method expression of the consumer's handler interface).
func Handle[H any, T Txner, M any, PM interface {
	*M
	message.Message
}](messageType, contentType, method string, handle func(H, T, PM) error) Input[H, T] {
	return Input[H, T]{
		MessageType: JournalType[M, PM](messageType, contentType),
		Method:      method,
		typ:         reflect.TypeFor[PM](),
		handle:      func(h H, tx T, msg message.Message) error { return handle(h, tx, msg.(PM)) },
	}
}

// Output is a type of journal message a consumer publishes.
type Output struct {
	// Selector is the label selector of the partition journals the messages
	// are published to.
	Selector string

	typ    reflect.Type
	newMsg func() message.Message
	key    message.MappingKeyFunc // Nil if messages have no partition key.
}

// name returns the protobuf name of the output's messages, or else their Go
// type. (Generated outputs are package variables, initialized before the
// descriptors of their messages: only now may they be asked.)
func (out *Output) name() string {
	if pm, ok := out.newMsg().(proto.Message); ok {
		return string(pm.ProtoReflect().Descriptor().FullName())
	}
	return out.typ.String()
}

// Publishes returns the Output of messages *M published to the partitions
// selector selects: to the partition their partition key maps them to
// (their AppendPartitionKey method, if they have one, by package
// partition's mapping, as the shards consuming them assume), or else to one
// at random.
func Publishes[M any, PM interface {
	*M
	message.Message
}](selector string) Output {
	var out = Output{Selector: selector, typ: reflect.TypeFor[PM](), newMsg: func() message.Message { return PM(new(M)) }}
	if _, ok := any(PM(nil)).(partition.Keyed); ok {
		out.key = partition.KeyOf
	}
	return out
}

// mapping is the mapping of an Output.
type mapping struct {
	typ     reflect.Type
	name    string
	mapping message.MappingFunc
}

// Consumer describes a generated consumer to NewAdapter: its handler
// interface H and its transaction T, the messages it reads and publishes,
// and its annotations.
type Consumer[H any, T Txner] struct {
	// Name is the consumer's service's protobuf full name.
	Name string
	// Store is the kind of store the consumer is annotated with.
	Store gcv1.StoreKind
	// ShardDefaults holds the shard defaults the consumer is annotated with.
	ShardDefaults pc.ShardSpec
	// Inputs are the messages the consumer reads.
	Inputs []Input[H, T]
	// Outputs are the messages the consumer publishes.
	Outputs []Output
	// NewTxn returns a new transaction whose tables are views of kv. It is
	// nil for a consumer without tables, whose transactions are new T
	// (and whose stores need not be KVStores).
	NewTxn func(kv KV) T
	// FinalizeTxn is the handler's method of that name.
	FinalizeTxn func(H, T) error
	// Tables tell the partition key of the rows of each of the consumer's
	// tables, and of each of its types of timers (whose schemas are
	// tables'), by which a rescale splits its shards' state.
	Tables []TableOwnership
	// OnFailure is the failure policy of the consumer's handlers, but for
	// those of Inputs with policies of their own.
	OnFailure FailurePolicy
	// Expiring are the consumer's tables whose rows expire.
	Expiring []Expiring[H, T]
	// Timers are the consumer's types of per-key timers.
	Timers []Timing[H, T]
}

// Adapter runs a handler H of a generated consumer, in transactions T, as an
// Application: it opens the consumer's store, picks its messages' types,
// calls the handler's method of each message, and publishes its messages to
// the partitions their mappings pick. It is also a BeginFinisher and a
// ShardDefaulter.
type Adapter[H any, T Txner] struct {
	c       *Consumer[H, T]
	handler H
	stores  StoreOpener
	types   MessageTypes
	inputs  []*Input[H, T] // Few: a scan beats a map.
	outputs []mapping
	txns    sync.Map // Of each Store, its T, from BeginTxn to FinishTxn.

	journals PartitionLister // Nil in tests that list none.
	families families        // Listings of the families read.
	guards   sync.Map        // Of each shard id, its *partitionGuard.
	firedAt  sync.Map        // Of each shard id, the firedMark of its store.
	views    ownedViews      // Of OwnedView.
}

var (
	_ Application    = (*Adapter[any, *Txn])(nil)
	_ BeginFinisher  = (*Adapter[any, *Txn])(nil)
	_ ShardDefaulter = (*Adapter[any, *Txn])(nil)
	_ FailurePolicer = (*Adapter[any, *Txn])(nil)
	_ Timekeeper     = (*Adapter[any, *Txn])(nil)
	_ Prefetcher     = (*Adapter[any, *Txn])(nil)
)

// NewAdapter returns an Adapter running handler as consumer c, whose store
// is opened by stores and whose published messages are routed among the
// journals listed by journals.
func NewAdapter[H any, T Txner](c *Consumer[H, T], handler H, stores StoreOpener, journals PartitionLister) (*Adapter[H, T], error) {
	var a = &Adapter[H, T]{
		c:        c,
		handler:  handler,
		stores:   stores,
		journals: journals,
	}
	var types []MessageType
	for i := range c.Inputs {
		var in = &c.Inputs[i]
		types = append(types, in.MessageType)
		a.inputs = append(a.inputs, in)
	}
	a.types = NewMessageTypes("consumer "+c.Name, types...)
	for _, out := range c.Outputs {
		var sel, err = pb.ParseLabelSelector(out.Selector)
		if err != nil {
			return nil, fmt.Errorf("partitions of %s: %w", out.name(), err)
		}
		var m = mapping{typ: out.typ, name: out.name()}
		m.mapping = partition.Mapping(out.key, journals.Partitions(sel))
		a.outputs = append(a.outputs, m)
	}
	return a, nil
}

// ConsumerName returns the full protobuf name of the consumer's service,
// under which its queries services register (runtime/query.ServicesOf).
func (a *Adapter[H, T]) ConsumerName() string { return a.c.Name }

// StoreKind returns the kind of store the consumer is annotated with.
func (a *Adapter[H, T]) StoreKind() gcv1.StoreKind {
	if a.c.Store == gcv1.StoreKind_STORE_KIND_UNSPECIFIED {
		return gcv1.StoreKind_STORE_KIND_ROCKSDB
	}
	return a.c.Store
}

// ShardDefaults returns a ShardSpec holding the shard defaults the consumer
// is annotated with. The service completes the specs applied through its
// Shard API with them.
func (a *Adapter[H, T]) ShardDefaults() pc.ShardSpec { return a.c.ShardDefaults }

// NewStore opens the shard's store, which must be a KVStore if the consumer
// has tables.
func (a *Adapter[H, T]) NewStore(shard Shard, rec Recorder) (Store, error) {
	var store, err = a.stores.OpenStore(shard, rec)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", a.c.Name, err)
	}
	if _, ok := store.(KVStore); !ok && a.c.NewTxn != nil {
		store.Destroy()
		return nil, a.notKV(store)
	}
	if _, ok := store.(Savepointer); !ok && a.needsSavepoints() {
		store.Destroy()
		return nil, fmt.Errorf("consumer %s: store %T cannot undo the writes of a failed handler call (it is not a runtime.Savepointer), which its failure policy needs", a.c.Name, store)
	}
	return store, nil
}

// policyOf returns the failure policy of in.
func (a *Adapter[H, T]) policyOf(in *Input[H, T]) FailurePolicy {
	if in.policy != nil {
		return *in.policy
	}
	return a.c.OnFailure
}

// needsSavepoints reports whether a failure policy of the consumer retries
// or records dead letters.
func (a *Adapter[H, T]) needsSavepoints() bool {
	for _, in := range a.inputs {
		if !a.policyOf(in).Fails() {
			return true
		}
	}
	return false
}

// FailurePolicy returns the failure policy of the handler of msg.
func (a *Adapter[H, T]) FailurePolicy(msg message.Message) FailurePolicy {
	var typ = reflect.TypeOf(msg)
	for _, in := range a.inputs {
		if in.typ == typ {
			return a.policyOf(in)
		}
	}
	return FailurePolicy{}
}

func (a *Adapter[H, T]) notKV(store Store) error {
	return fmt.Errorf("consumer %s: store %T is not a runtime.KVStore, which its tables need", a.c.Name, store)
}

// NewMessage returns a new message of the type named by the journal's
// "app.gazette.dev/message-type" label, among those the consumer reads.
func (a *Adapter[H, T]) NewMessage(spec *pb.JournalSpec) (message.Message, error) {
	return a.types.New(spec)
}

// MessageConstructor returns the constructor of the journal's messages
// (see runtime.MessageConstructor).
func (a *Adapter[H, T]) MessageConstructor(spec *pb.JournalSpec) (func() message.Message, error) {
	return a.types.Constructor(spec)
}

// newTxn returns a new transaction of store, whose state was built under
// g's partitioning (if g isn't nil).
func (a *Adapter[H, T]) newTxn(shard Shard, store Store, env message.Envelope, pub *message.Publisher, g *partitionGuard) (T, error) {
	var tx T
	if a.c.NewTxn == nil {
		tx = reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
	} else if kvs, ok := store.(KVStore); !ok {
		return tx, a.notKV(store)
	} else {
		var kv = kvs.KV()
		if g != nil && g.built.hides() {
			// Split: its tables don't see what it no longer owns.
			kv = &ownedKV{KV: kv, owned: ownedReader{r: kv, h: a.hiderOf(*g.built.Owns)}}
		}
		if a.keepsTime() {
			// The tables' KV tells the time of the transaction's Txn.
			var tkv = &timedKV{KV: kv}
			tx = a.c.NewTxn(tkv)
			tkv.tx = tx.txn()
		} else {
			tx = a.c.NewTxn(kv)
		}
	}
	*tx.txn() = Txn{Shard: shard, Store: store, Envelope: env, pub: pub, outputs: a.outputs, name: a.c.Name, guard: g}
	return tx, nil
}

// txnOf returns the transaction of store, which BeginTxn began, set for a
// handler call on env.
func (a *Adapter[H, T]) txnOf(shard Shard, store Store, env message.Envelope, pub *message.Publisher) (T, error) {
	if v, ok := a.txns.Load(store); ok {
		var tx = v.(T)
		var b = tx.txn()
		b.Envelope, b.pub = env, pub
		return tx, nil
	}
	// Called outside of BeginTxn and FinishTxn, as a test may.
	return a.newTxn(shard, store, env, pub, nil)
}

// ConsumeMessage hands the message of env to its handler method.
func (a *Adapter[H, T]) ConsumeMessage(shard Shard, store Store, env message.Envelope, pub *message.Publisher) error {
	var tx, err = a.txnOf(shard, store, env, pub)
	if err != nil {
		return err
	}
	if g := tx.txn().guard; g != nil {
		if err = g.checkJournal(shard, env, a.c.Name); err != nil {
			return Fatal(err)
		} else if g.filter != nil && !g.ownsMessage(env.Message) {
			return nil // Another shard's, since the shard's state was split.
		}
	}
	var typ = reflect.TypeOf(env.Message)
	for _, in := range a.inputs {
		if in.typ != typ {
			continue
		}
		var b = tx.txn()
		if b.hold = !a.policyOf(in).Fails(); !b.hold {
			err = in.handle(a.handler, tx, env.Message)
		} else if err = in.handle(a.handler, tx, env.Message); err != nil {
			b.drop()
		} else if err = b.flush(); err != nil {
			return Fatal(fmt.Errorf("%s.%s: %w", a.c.Name, in.Method, err))
		}
		if err != nil {
			return fmt.Errorf("%s.%s: %w", a.c.Name, in.Method, &MethodError{Method: in.Method, Err: err})
		}
		return nil
	}
	return Fatal(fmt.Errorf("%s has no handler for %T", a.c.Name, env.Message))
}

// BeginTxn begins the transaction of store, in which handlers are called,
// and calls the handler's BeginTxn, if the handler is a BeginFinisher.
func (a *Adapter[H, T]) BeginTxn(shard Shard, store Store) error {
	var g *partitionGuard
	if kvs, ok := store.(KVStore); ok && a.c.NewTxn != nil && a.journals != nil {
		// The state of a consumer with tables is built under a partitioning
		// of its sources, checked at each transaction's beginning.
		var err error
		if g, err = a.guardPartitions(shard, store, kvs.KV()); err != nil {
			return err
		} else if err = g.check(shard, a.c.Name); err != nil {
			return err
		} else if err = a.dropHandoff(shard, kvs.KV(), g); err != nil {
			return err
		}
		g.filter = g.built.Owns
	}
	var tx, err = a.newTxn(shard, store, message.Envelope{}, nil, g)
	if err != nil {
		return err
	}
	a.txns.Store(store, tx)
	if bf, ok := any(a.handler).(BeginFinisher); ok {
		return bf.BeginTxn(shard, store)
	}
	return nil
}

// FinishTxn ends the transaction of store, and calls the handler's
// FinishTxn, if the handler is a BeginFinisher.
func (a *Adapter[H, T]) FinishTxn(shard Shard, store Store, err error) error {
	a.txns.Delete(store)
	if bf, ok := any(a.handler).(BeginFinisher); ok {
		return bf.FinishTxn(shard, store, err)
	}
	return nil
}

// FinalizeTxn calls the handler's FinalizeTxn, which flushes what the
// transaction buffered.
func (a *Adapter[H, T]) FinalizeTxn(shard Shard, store Store, pub *message.Publisher) error {
	var tx, err = a.txnOf(shard, store, message.Envelope{}, pub)
	if err != nil {
		return err
	}
	if err = a.c.FinalizeTxn(a.handler, tx); err != nil {
		return fmt.Errorf("%s: %w", a.c.Name, err)
	}
	if g := tx.txn().guard; g != nil {
		// Every message of the transaction was applied: the state may
		// split now, for the next transaction on.
		return a.split(shard, store, store.(KVStore).KV(), g)
	}
	return nil
}

// UUIDOf returns the UUID held in b, the uuid_field of a journal message, or
// the zero UUID if b does not hold exactly 16 bytes.
func UUIDOf(b []byte) message.UUID {
	var u message.UUID
	if len(b) == len(u) {
		copy(u[:], b)
	}
	return u
}
