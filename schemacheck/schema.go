package schemacheck

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// schema is what one version of a set of files declares: the annotated
// messages and services, read leniently (a name that resolves to nothing is
// left out or kept unresolved; validating annotations is the generator's job).
type schema struct {
	// messages holds every message of the files and their imports.
	messages  map[protoreflect.FullName]protoreflect.MessageDescriptor
	tables    []*table
	journals  []*journal
	consumers []*consumer

	tableByName    map[string]*table
	tableByMsg     map[protoreflect.FullName]*table
	journalByType  map[string]*journal
	journalByMsg   map[protoreflect.FullName]*journal
	consumerByName map[protoreflect.FullName]*consumer
}

// keyField is one field of a table key or a partition key, as annotated.
type keyField struct {
	name string
	fd   protoreflect.FieldDescriptor // nil if name is no field of the message.
	desc bool
}

// table is a message annotated as a state table.
type table struct {
	msg      protoreflect.MessageDescriptor
	name     string // Effective name: the stored keys' prefix.
	explicit string // The annotation's name, or "" for the default.
	key      []keyField
}

// journal is a message annotated as a journal message.
type journal struct {
	msg          protoreflect.MessageDescriptor
	messageType  string       // Effective value of the message-type label.
	framing      gcv1.Framing // Normalized: FRAMING_UNSPECIFIED is FRAMING_PROTOBUF.
	uuid         keyField
	partitionKey []keyField
	partitions   uint32 // Of its family: 0 if it declares none.
}

// consumer is a service annotated as a consumer.
type consumer struct {
	svc     protoreflect.ServiceDescriptor
	tables  []protoreflect.MessageDescriptor // The messages of its tables that resolve.
	sources []protoreflect.MethodDescriptor
}

// load reads the annotations of files and of every file they import.
func load(files []protoreflect.FileDescriptor) *schema {
	s := &schema{
		messages:       map[protoreflect.FullName]protoreflect.MessageDescriptor{},
		tableByName:    map[string]*table{},
		tableByMsg:     map[protoreflect.FullName]*table{},
		journalByType:  map[string]*journal{},
		journalByMsg:   map[protoreflect.FullName]*journal{},
		consumerByName: map[protoreflect.FullName]*consumer{},
	}
	all := protoload.WithImports(files...)
	// Files in path order, so that duplicate declarations of an invalid set
	// resolve the same way whatever the order of the input.
	slices.SortFunc(all, func(a, b protoreflect.FileDescriptor) int { return strings.Compare(a.Path(), b.Path()) })

	for _, f := range all {
		walkMessages(f.Messages(), func(m protoreflect.MessageDescriptor) {
			if _, ok := s.messages[m.FullName()]; !ok {
				s.messages[m.FullName()] = m
			}
		})
	}
	for _, f := range all {
		walkMessages(f.Messages(), func(m protoreflect.MessageDescriptor) {
			if s.messages[m.FullName()] != m {
				return // A duplicate declaration.
			}
			opts := protoload.MessageOptions(m)
			if o := opts.GetTable(); o != nil {
				s.addTable(m, o)
			}
			if o := opts.GetJournal(); o != nil {
				s.addJournal(m, o)
			}
		})
	}
	for _, f := range all {
		for i := 0; i < f.Services().Len(); i++ {
			if svc := f.Services().Get(i); s.consumerByName[svc.FullName()] == nil {
				if o := protoload.ConsumerOptions(svc); o != nil {
					s.addConsumer(svc, o)
				}
			}
		}
	}
	return s
}

func walkMessages(msgs protoreflect.MessageDescriptors, fn func(protoreflect.MessageDescriptor)) {
	for i := 0; i < msgs.Len(); i++ {
		fn(msgs.Get(i))
		walkMessages(msgs.Get(i).Messages(), fn)
	}
}

// field returns the keyField of m named name.
func field(m protoreflect.MessageDescriptor, name string, desc bool) keyField {
	return keyField{name: name, fd: m.Fields().ByName(protoreflect.Name(name)), desc: desc}
}

func (s *schema) addTable(m protoreflect.MessageDescriptor, o *gcv1.Table) {
	t := &table{msg: m, name: o.GetName(), explicit: o.GetName()}
	if t.name == "" {
		t.name = string(m.FullName())
	}
	for _, k := range o.GetKey() {
		t.key = append(t.key, field(m, k.GetField(), k.GetDescending()))
	}
	s.tables = append(s.tables, t)
	s.tableByMsg[m.FullName()] = t
	if s.tableByName[t.name] == nil {
		s.tableByName[t.name] = t
	}
}

func (s *schema) addJournal(m protoreflect.MessageDescriptor, o *gcv1.JournalMessage) {
	j := &journal{msg: m, messageType: o.GetMessageType(), framing: o.GetFraming()}
	if j.messageType == "" {
		j.messageType = string(m.FullName())
	}
	if j.framing == gcv1.Framing_FRAMING_UNSPECIFIED {
		j.framing = gcv1.Framing_FRAMING_PROTOBUF
	}
	if o.GetUuidField() != "" {
		j.uuid = field(m, o.GetUuidField(), false)
	}
	if o.GetFamily() != nil {
		j.partitions = max(1, o.GetFamily().GetPartitions()) // Defaults to 1.
	}
	for _, name := range o.GetPartitionKey() {
		j.partitionKey = append(j.partitionKey, field(m, name, false))
	}
	s.journals = append(s.journals, j)
	s.journalByMsg[m.FullName()] = j
	if s.journalByType[j.messageType] == nil {
		s.journalByType[j.messageType] = j
	}
}

func (s *schema) addConsumer(svc protoreflect.ServiceDescriptor, o *gcv1.Consumer) {
	c := &consumer{svc: svc}
	for _, name := range o.GetTables() {
		if m := s.resolve(svc, name); m != nil {
			c.tables = append(c.tables, m)
		}
	}
	for i := 0; i < svc.Methods().Len(); i++ {
		c.sources = append(c.sources, svc.Methods().Get(i))
	}
	s.consumers = append(s.consumers, c)
	s.consumerByName[svc.FullName()] = c
}

// resolve resolves a message name of an annotation of d as the generator
// does: relative to the package of d and its parents, or fully qualified
// with a leading dot.
func (s *schema) resolve(d protoreflect.Descriptor, name string) protoreflect.MessageDescriptor {
	if strings.HasPrefix(name, ".") {
		return s.messages[protoreflect.FullName(name[1:])]
	}
	for scope := d.ParentFile().Package(); ; scope = scope.Parent() {
		full := protoreflect.FullName(name)
		if scope != "" {
			full = protoreflect.FullName(string(scope) + "." + name)
		}
		if m, ok := s.messages[full]; ok {
			return m
		}
		if scope == "" {
			return nil
		}
	}
}

// holds reports whether c holds the table of message m.
func (c *consumer) holds(m protoreflect.FullName) bool {
	for _, t := range c.tables {
		if t.FullName() == m {
			return true
		}
	}
	return false
}

// consumes reports whether c has a handler of message m.
func (c *consumer) consumes(m protoreflect.FullName) bool {
	for _, meth := range c.sources {
		if meth.Input().FullName() == m {
			return true
		}
	}
	return false
}

// String names t in findings.
func (t *table) String() string {
	if t.name == string(t.msg.FullName()) {
		return fmt.Sprintf("table %q", t.name)
	}
	return fmt.Sprintf("table %q (%s)", t.name, t.msg.FullName())
}

// stored reports whether field fd of t is kept in stored values: all but
// the key fields without field presence (but Timestamps), which reads set
// back from the key.
func (t *table) stored(fd protoreflect.FieldDescriptor) bool {
	for _, k := range t.key {
		if k.fd == fd {
			return fd.HasPresence() || fd.Kind() == protoreflect.MessageKind
		}
	}
	return true
}

// keyString renders a key as "(a, b descending)".
func keyString(key []keyField) string {
	var parts []string
	for _, k := range key {
		s := k.name
		if k.desc {
			s += " descending"
		}
		parts = append(parts, s)
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// typeName names the type of fd, as "int64", "acme.v1.Status",
// "repeated string" or "map<string, int64>".
func typeName(fd protoreflect.FieldDescriptor) string {
	if fd == nil {
		return "no field"
	}
	if fd.IsMap() {
		return "map<" + typeName(fd.MapKey()) + ", " + typeName(fd.MapValue()) + ">"
	}
	var s string
	switch fd.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		s = string(fd.Message().FullName())
	case protoreflect.EnumKind:
		s = string(fd.Enum().FullName())
	default:
		s = fd.Kind().String()
	}
	if fd.IsList() {
		return "repeated " + s
	}
	return s
}
