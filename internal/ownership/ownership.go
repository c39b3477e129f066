// Package ownership holds the rule of row ownership: which shard of a
// rescaled consumer each row of the consumer's tables, and each of its
// per-key timers, belongs to.
//
// A consumer's inputs, the journal messages its rpcs take, are routed to
// partitions by their partition key (the fields their journal option's
// partition_key names). A row of one of its tables is owned by the shard of
// the partition its own partition key maps to: the values, in the row's key,
// of the table's key fields of the names and types of the partition key's
// fields, encoded as the inputs' AppendPartitionKey encode theirs. So that
// the shard reading a key's messages holds the key's rows, and a rescale,
// splitting a shard's partitions, splits its rows alike.
//
// A consumer can be rescaled if its inputs share one partition key (fields
// of the same names and types, in the same order: a message spread at
// random, without one, has no owner) and the key of every table carries
// each field of it, anywhere in the key: a table keyed by (balance_cents
// descending, customer_id, account_id) is owned by customer_id. A timer's
// key is held to the same rule, as a table's: a timer belongs to the shard
// owning its key, and so fires there (with them go the entries of the
// index of what falls due of rows that expire and of timers). Presence
// doesn't matter: a partition key encodes an unset field as its zero value,
// as a message's getter returns it.
//
// Both protoc-gen-gazconsumer, which generates each table's ownership and
// enforces the consumer option `rescalable`, and `gazconsumer rescale`
// apply the rule, through Of.
package ownership

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
	"github.com/gazconsumer/gazconsumer/internal/protopos"
	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// Consumer is the ownership of the rows of a consumer's tables.
type Consumer struct {
	// Service is the consumer's service.
	Service protoreflect.ServiceDescriptor
	// Required is the consumer's option rescalable: Err must be nil.
	Required bool
	// PartitionKey holds the fields of the partition key its inputs share,
	// of Input, or nil if NoKey is not.
	PartitionKey []protoreflect.FieldDescriptor
	// Input is the first input of the consumer (the input of its first
	// rpc), whose fields PartitionKey holds.
	Input protoreflect.MessageDescriptor
	// NoKey tells, positioned at an rpc of the consumer, why its inputs
	// share no partition key: one of them has none, or two differ. Nil if
	// they share one.
	NoKey error
	// Tables are the consumer's tables, in the order of its option tables.
	Tables []Table
	// Timers are the consumer's types of timers, in the order of its option
	// timers: their keys are owned as tables' are.
	Timers []Table

	noKey string // NoKey, unpositioned.
}

// Table is the ownership of the rows of one table of a consumer, or of the
// timers of one type.
type Table struct {
	// Message is the table's row message (the timers' message).
	Message protoreflect.MessageDescriptor
	// Name is the table's name in its store: of timers, "timer:" and the
	// message's full name.
	Name string
	// Timer tells that these are timers, not a table's rows.
	Timer bool
	// Key holds the table's key fields, in order.
	Key []KeyField
	// Owner holds, for each field of the consumer's PartitionKey, the
	// index in Key of the key field of its name and type, or is nil if
	// Unowned is not.
	Owner []int
	// TTL is the table's option ttl: how long its rows live, if they
	// expire.
	TTL string
	// Unowned tells, positioned at the table's entry in the consumer's
	// option tables (or timers), why the table's rows have no owner:
	// naming the table, and the partition key field its key lacks. Nil if
	// Owner is not.
	Unowned error
}

// KeyField is a field of a table's key.
type KeyField struct {
	// Field is the message field.
	Field protoreflect.FieldDescriptor
	// Descending orders the table's rows from the field's largest values
	// to its smallest.
	Descending bool
}

// Resolver finds descriptors by full name: a *protoregistry.Files is one.
type Resolver interface {
	FindDescriptorByName(protoreflect.FullName) (protoreflect.Descriptor, error)
}

// Err returns nil if the consumer can be rescaled: if it has no tables or
// timers, or if its inputs share a partition key that every table's and
// timer's key carries. Else it returns why not, positioned in a .proto
// file: NoKey, or the Unowned of the first table (then timer) without an
// owner.
func (c *Consumer) Err() error {
	if len(c.Tables) == 0 && len(c.Timers) == 0 {
		return nil
	} else if c.NoKey != nil {
		return c.NoKey
	}
	for _, t := range slices.Concat(c.Tables, c.Timers) {
		if t.Unowned != nil {
			return t.Unowned
		}
	}
	return nil
}

// Field numbers of the gazconsumer options, for positions.
var (
	consumerTables      = fieldNumber(&gcv1.Consumer{}, "tables")
	consumerTimers      = fieldNumber(&gcv1.Consumer{}, "timers")
	messageJournal      = fieldNumber(&gcv1.MessageOptions{}, "journal")
	messageTable        = fieldNumber(&gcv1.MessageOptions{}, "table")
	messageTimer        = fieldNumber(&gcv1.MessageOptions{}, "timer")
	journalPartitionKey = fieldNumber(&gcv1.JournalMessage{}, "partition_key")
	tableKey            = fieldNumber(&gcv1.Table{}, "key")
	timerKey            = fieldNumber(&gcv1.Timer{}, "key")
	keyFieldField       = fieldNumber(&gcv1.KeyField{}, "field")
)

// fieldNumber returns the number of field name of m.
func fieldNumber(m proto.Message, name protoreflect.Name) int32 {
	return int32(m.ProtoReflect().Descriptor().Fields().ByName(name).Number())
}

// Of returns the ownership of the tables of consumer svc, a service with
// the (gazconsumer.v1.consumer) option, whose tables it resolves with
// files (the file of svc and its imports, transitively, if nil). It fails
// only if the annotations of svc, its inputs or its tables are invalid (as
// protoc-gen-gazconsumer would refuse them): that the consumer can't be
// rescaled is told by the result's Err.
func Of(svc protoreflect.ServiceDescriptor, files Resolver) (*Consumer, error) {
	opts := protoload.ConsumerOptions(svc)
	if opts == nil {
		return nil, protopos.Errorf(protopos.Of(svc), "service %s is not a consumer: it has no (gazconsumer.v1.consumer) option", svc.FullName())
	}
	if files == nil {
		files = imported(svc.ParentFile())
	}
	c := &Consumer{Service: svc, Required: opts.GetRescalable()}
	if err := c.inputs(); err != nil {
		return nil, err
	}
	for i, name := range opts.GetTables() {
		t, err := c.table(files, i, name, false)
		if err != nil {
			return nil, err
		}
		c.Tables = append(c.Tables, t)
	}
	for i, name := range opts.GetTimers() {
		t, err := c.table(files, i, name, true)
		if err != nil {
			return nil, err
		}
		c.Timers = append(c.Timers, t)
	}
	return c, nil
}

// input is an input of a consumer: its rpc, message, and partition key.
type input struct {
	rpc protoreflect.MethodDescriptor
	msg protoreflect.MessageDescriptor
	key []protoreflect.FieldDescriptor
}

// describe returns "Order (orders.proto:12:5), partitioned by (customer_id
// string)", or "..., which has no partition key".
func (in input) describe() string {
	pos := protopos.Option(in.msg, messageJournal, journalPartitionKey)
	if len(in.key) == 0 {
		return fmt.Sprintf("%s (%s), which has no partition key", in.msg.FullName(), protopos.Option(in.msg, messageJournal))
	}
	return fmt.Sprintf("%s (%s), partitioned by (%s)", in.msg.FullName(), pos, fieldsString(in.key))
}

// inputs sets the partition key of c, or NoKey.
func (c *Consumer) inputs() error {
	var ins []input
	methods := c.Service.Methods()
	for i := 0; i < methods.Len(); i++ {
		m := methods.Get(i)
		j := protoload.MessageOptions(m.Input())
		if j.GetTimer() != nil {
			continue // It handles the firings of a timer, which no journal partitions.
		} else if j.GetJournal() == nil {
			return protopos.Errorf(protopos.Of(m), "rpc %s of consumer %s consumes %s, which is not a journal message", m.Name(), c.Service.Name(), m.Input().FullName())
		}
		in := input{rpc: m, msg: m.Input()}
		for k, name := range j.GetJournal().GetPartitionKey() {
			f := m.Input().Fields().ByName(protoreflect.Name(name))
			if f == nil {
				return protopos.Errorf(protopos.Option(m.Input(), messageJournal, journalPartitionKey, int32(k)),
					"partition_key %q is not a field of %s", name, m.Input().Name())
			}
			in.key = append(in.key, f)
		}
		ins = append(ins, in)
	}
	if len(ins) == 0 {
		return protopos.Errorf(protopos.Of(c.Service), "consumer %s has no rpcs", c.Service.Name())
	}
	first := ins[0]
	c.Input = first.msg
	for _, in := range ins[1:] {
		if !SamePartitionKey(first.key, in.key) {
			c.noKey = fmt.Sprintf("consumer %s reads %s, and %s: its inputs share no partition key, so no shard owns a key's rows",
				c.Service.Name(), first.describe(), in.describe())
			c.NoKey = protopos.Errorf(protopos.Of(in.rpc), "%s", c.noKey)
			return nil
		}
	}
	if len(first.key) == 0 {
		c.noKey = fmt.Sprintf("consumer %s reads %s: its messages are spread over the partitions at random, so no shard owns a key's rows",
			c.Service.Name(), first.describe())
		c.NoKey = protopos.Errorf(protopos.Of(first.rpc), "%s", c.noKey)
		return nil
	}
	c.PartitionKey = first.key
	return nil
}

// table returns the ownership of the table named name, the i-th of the
// consumer's option tables, or, if timer, of the timers of message name,
// the i-th of its option timers.
func (c *Consumer) table(files Resolver, i int, name string, timer bool) (Table, error) {
	noun, rows, list, option, keyPath := "table", "rows", consumerTables, messageTable, []int32{messageTable, tableKey}
	if timer {
		noun, rows, list, option, keyPath = "timer", "timers", consumerTimers, messageTimer, []int32{messageTimer, timerKey}
	}
	at := protopos.Option(c.Service, list, int32(i))
	m := resolve(files, c.Service, name)
	if m == nil {
		return Table{}, protopos.Errorf(at, "%s %q of consumer %s is not a known message", noun, name, c.Service.Name())
	}
	opts := protoload.MessageOptions(m)
	var keys []*gcv1.KeyField
	t := Table{Message: m, Timer: timer}
	switch {
	case timer && opts.GetTimer() != nil:
		t.Name, keys = "timer:"+string(m.FullName()), opts.GetTimer().GetKey()
	case !timer && opts.GetTable() != nil:
		t.Name, t.TTL, keys = opts.GetTable().GetName(), opts.GetTable().GetTtl(), opts.GetTable().GetKey()
		if t.Name == "" {
			t.Name = string(m.FullName())
		}
	default:
		return Table{}, protopos.Errorf(at, "%s %q of consumer %s: message %s has no (gazconsumer.v1.message).%s option", noun, name, c.Service.Name(), m.FullName(), noun)
	}
	for k, kf := range keys {
		f := m.Fields().ByName(protoreflect.Name(kf.GetField()))
		if f == nil {
			return Table{}, protopos.Errorf(protopos.Option(m, append(keyPath, int32(k), keyFieldField)...), "key field %q is not a field of %s", kf.GetField(), m.Name())
		}
		t.Key = append(t.Key, KeyField{Field: f, Descending: kf.GetDescending()})
	}
	decl := protopos.Option(m, option)
	if c.NoKey != nil {
		t.Unowned = protopos.Errorf(at, "%s %s (%s) of consumer %s has no owner: %s", noun, m.Name(), decl, c.Service.Name(), c.noKey)
		return t, nil
	}
	for _, pk := range c.PartitionKey {
		k := slices.IndexFunc(t.Key, func(k KeyField) bool { return k.Field.Name() == pk.Name() && SameType(k.Field, pk) })
		if k >= 0 {
			t.Owner = append(t.Owner, k)
			continue
		}
		var detail string
		switch f := m.Fields().ByName(pk.Name()); {
		case f == nil:
			detail = "it has no such field"
		case !slices.ContainsFunc(t.Key, func(k KeyField) bool { return k.Field == f }):
			detail = fmt.Sprintf("its field %s (%s) is not one of its key fields (%s)", f.Name(), protopos.Of(f), keyString(t.Key))
		default:
			detail = fmt.Sprintf("its key field %s (%s) is %s, not %s", f.Name(), protopos.Of(f), typeName(f), typeName(pk))
		}
		t.Owner = nil // No owner for the fields before either.
		t.Unowned = protopos.Errorf(at, "%s %s (%s) of consumer %s has no key field %s of type %s, a field of the partition key (%s) of its inputs (%s, %s): %s; its %s have no owner, so the consumer can't be rescaled",
			noun, m.Name(), decl, c.Service.Name(), pk.Name(), typeName(pk), fieldsString(c.PartitionKey), c.Input.FullName(),
			protopos.Option(c.Input, messageJournal, journalPartitionKey), detail, rows)
		return t, nil
	}
	return t, nil
}

// SamePartitionKey reports whether partition keys a and b are of fields of
// the same names and types, in the same order.
func SamePartitionKey(a, b []protoreflect.FieldDescriptor) bool {
	return slices.EqualFunc(a, b, func(x, y protoreflect.FieldDescriptor) bool {
		return x.Name() == y.Name() && SameType(x, y)
	})
}

// SameType reports whether fields a and b have one type: kind and
// cardinality, and enum or message type. Their presence may differ, and a
// message may be encoded as a group in one and not in the other (an
// edition's features.message_encoding): their Go fields are the same.
func SameType(a, b protoreflect.FieldDescriptor) bool {
	if kindOf(a) != kindOf(b) || a.Cardinality() != b.Cardinality() || a.IsMap() != b.IsMap() {
		return false
	}
	switch a.Kind() {
	case protoreflect.EnumKind:
		return a.Enum().FullName() == b.Enum().FullName()
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return a.Message().FullName() == b.Message().FullName()
	}
	return true
}

// kindOf returns the kind of f, MessageKind for a group.
func kindOf(f protoreflect.FieldDescriptor) protoreflect.Kind {
	if f.Kind() == protoreflect.GroupKind {
		return protoreflect.MessageKind
	}
	return f.Kind()
}

// typeName returns the type of f, as "string" or "acme.v1.Kind".
func typeName(f protoreflect.FieldDescriptor) string {
	switch f.Kind() {
	case protoreflect.EnumKind:
		return string(f.Enum().FullName())
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return string(f.Message().FullName())
	}
	return f.Kind().String()
}

// fieldsString returns fs as "customer_id string, day int32".
func fieldsString(fs []protoreflect.FieldDescriptor) string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Name())+" "+typeName(f))
	}
	return strings.Join(out, ", ")
}

// keyString returns key as "balance_cents descending, customer_id".
func keyString(key []KeyField) string {
	var out []string
	for _, k := range key {
		s := string(k.Field.Name())
		if k.Descending {
			s += " descending"
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// resolve resolves the message name of an annotation of d as
// protoc-gen-gazconsumer does: relative to the package of d and its
// parents, or fully qualified with a leading dot. It returns nil if files
// have no such message.
func resolve(files Resolver, d protoreflect.Descriptor, name string) protoreflect.MessageDescriptor {
	find := func(full protoreflect.FullName) protoreflect.MessageDescriptor {
		m, _ := files.FindDescriptorByName(full)
		md, _ := m.(protoreflect.MessageDescriptor)
		return md
	}
	if strings.HasPrefix(name, ".") {
		return find(protoreflect.FullName(name[1:]))
	}
	for scope := d.ParentFile().Package(); ; scope = scope.Parent() {
		full := protoreflect.FullName(name)
		if scope != "" {
			full = protoreflect.FullName(string(scope) + "." + name)
		}
		if m := find(full); m != nil {
			return m
		}
		if scope == "" {
			return nil
		}
	}
}

// messages is a Resolver of the messages of files.
type messages map[protoreflect.FullName]protoreflect.MessageDescriptor

// errNotFound is the error of a name messages lack.
var errNotFound = errors.New("not found")

// FindDescriptorByName returns the message named name.
func (ms messages) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if m, ok := ms[name]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("message %s: %w", name, errNotFound)
}

// imported returns the messages of f and of the files it imports,
// transitively.
func imported(f protoreflect.FileDescriptor) messages {
	ms := messages{}
	seen := map[string]bool{}
	var walkFile func(f protoreflect.FileDescriptor)
	var walk func(msgs protoreflect.MessageDescriptors)
	walk = func(msgs protoreflect.MessageDescriptors) {
		for i := 0; i < msgs.Len(); i++ {
			ms[msgs.Get(i).FullName()] = msgs.Get(i)
			walk(msgs.Get(i).Messages())
		}
	}
	walkFile = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		walk(f.Messages())
		for i := 0; i < f.Imports().Len(); i++ {
			walkFile(f.Imports().Get(i).FileDescriptor)
		}
	}
	walkFile(f)
	return ms
}
