package gengc

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/labels"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// journalMsg is a message annotated as a journal message.
type journalMsg struct {
	msg          *protogen.Message
	uuid         *protogen.Field
	messageType  string // Value of the message-type label.
	contentType  string // Content type of the annotated framing.
	partitionKey []*protogen.Field
}

// keyField is one field of a table's composite key.
type keyField struct {
	field *protogen.Field
	desc  bool
}

// table is a message annotated as a state table.
type table struct {
	msg  *protogen.Message
	name string
	key  []keyField
}

// handler is one rpc of a consumer.
type handler struct {
	method  *protogen.Method
	journal *journalMsg
}

// publish is one journal message published by a consumer.
type publish struct {
	journal  *journalMsg
	selector string
}

// consumer is a service annotated as a consumer.
type consumer struct {
	svc       *protogen.Service
	opts      *gcv1.Consumer
	handlers  []handler
	tables    []*table
	publishes []publish
}

// fileModel is what is generated for one .proto file.
type fileModel struct {
	file      *protogen.File
	journals  []*journalMsg
	tables    []*table
	consumers []*consumer
}

// model resolves and validates the annotations of a request.
type model struct {
	messages map[protoreflect.FullName]*protogen.Message
	journals map[protoreflect.FullName]*journalMsg
	tables   map[protoreflect.FullName]*table
	files    []*fileModel
	// pkgNames are the Go package names of import paths.
	pkgNames map[protogen.GoImportPath]protogen.GoPackageName
}

// errorf returns an error positioned at the declaration of d.
func errorf(d protoreflect.Descriptor, format string, args ...any) error {
	loc := d.ParentFile().SourceLocations().ByDescriptor(d)
	return fmt.Errorf("%s:%d:%d: %s", d.ParentFile().Path(), loc.StartLine+1, loc.StartColumn+1, fmt.Sprintf(format, args...))
}

// optErrorf returns an error positioned at the gazconsumer option of d, a
// message or a service, or at d if the option's position is unknown.
func optErrorf(d protoreflect.Descriptor, format string, args ...any) error {
	locs := d.ParentFile().SourceLocations()
	path := append(protoreflect.SourcePath(nil), locs.ByDescriptor(d).Path...)
	switch d.(type) {
	case protoreflect.MessageDescriptor:
		path = append(path, 7, gcv1.E_Message.Field) // DescriptorProto.options
	case protoreflect.ServiceDescriptor:
		path = append(path, 3, gcv1.E_Consumer.Field) // ServiceDescriptorProto.options
	}
	// The option may be recorded as a whole, or (with a field path, as in
	// `option (gazconsumer.v1.message).table = {...}`) by its field.
	for i := 0; i < locs.Len(); i++ {
		loc := locs.Get(i)
		if len(loc.Path) >= len(path) && slices.Equal(loc.Path[:len(path)], path) {
			return fmt.Errorf("%s:%d:%d: %s", d.ParentFile().Path(), loc.StartLine+1, loc.StartColumn+1, fmt.Sprintf(format, args...))
		}
	}
	return errorf(d, format, args...)
}

func messageOptions(m *protogen.Message) *gcv1.MessageOptions {
	opts, _ := proto.GetExtension(m.Desc.Options(), gcv1.E_Message).(*gcv1.MessageOptions)
	return opts
}

func consumerOptions(s *protogen.Service) *gcv1.Consumer {
	opts, _ := proto.GetExtension(s.Desc.Options(), gcv1.E_Consumer).(*gcv1.Consumer)
	return opts
}

func walkMessages(msgs []*protogen.Message, fn func(*protogen.Message)) {
	for _, m := range msgs {
		fn(m)
		walkMessages(m.Messages, fn)
	}
}

// fieldByName returns the field of m named name.
func fieldByName(m *protogen.Message, name string) *protogen.Field {
	for _, f := range m.Fields {
		if string(f.Desc.Name()) == name {
			return f
		}
	}
	return nil
}

// buildModel resolves the annotations of every file of gen, and validates
// those of the files to generate.
func buildModel(gen *protogen.Plugin) (*model, error) {
	md := &model{
		messages: map[protoreflect.FullName]*protogen.Message{},
		journals: map[protoreflect.FullName]*journalMsg{},
		tables:   map[protoreflect.FullName]*table{},
		pkgNames: map[protogen.GoImportPath]protogen.GoPackageName{},
	}
	for _, f := range gen.Files {
		md.pkgNames[f.GoImportPath] = f.GoPackageName
		walkMessages(f.Messages, func(m *protogen.Message) { md.messages[m.Desc.FullName()] = m })
	}
	for _, f := range gen.Files {
		if !f.Generate {
			continue
		}
		fm := &fileModel{file: f}
		var err error
		walkMessages(f.Messages, func(m *protogen.Message) {
			if err != nil {
				return
			}
			var j *journalMsg
			var t *table
			if j, err = md.journal(m); err == nil && j != nil {
				fm.journals = append(fm.journals, j)
			}
			if err != nil {
				return
			}
			if t, err = md.table(m); err == nil && t != nil {
				fm.tables = append(fm.tables, t)
			}
		})
		if err != nil {
			return nil, err
		}
		for _, s := range f.Services {
			c, err := md.consumer(s)
			if err != nil {
				return nil, err
			} else if c != nil {
				fm.consumers = append(fm.consumers, c)
			}
		}
		md.files = append(md.files, fm)
	}
	if err := md.checkTableNames(); err != nil {
		return nil, err
	}
	return md, nil
}

// journal returns the journal annotation of m, or nil if it has none.
func (md *model) journal(m *protogen.Message) (*journalMsg, error) {
	if j, ok := md.journals[m.Desc.FullName()]; ok {
		return j, nil
	}
	opts := messageOptions(m).GetJournal()
	if opts == nil {
		return nil, nil
	}
	j := &journalMsg{msg: m, messageType: opts.GetMessageType()}
	if j.messageType == "" {
		j.messageType = string(m.Desc.FullName())
	}
	if err := pb.ValidateToken(j.messageType, pb.TokenSymbols, 1, 512); err != nil {
		return nil, optErrorf(m.Desc, "message_type %q is not a valid journal label value: %v", j.messageType, err)
	}
	switch opts.GetFraming() {
	case gcv1.Framing_FRAMING_UNSPECIFIED, gcv1.Framing_FRAMING_PROTOBUF:
		j.contentType = labels.ContentType_ProtoFixed
	case gcv1.Framing_FRAMING_JSON:
		j.contentType = labels.ContentType_JSONLines
	default:
		return nil, optErrorf(m.Desc, "unknown framing %v", opts.GetFraming())
	}
	if opts.GetUuidField() == "" {
		return nil, optErrorf(m.Desc, "journal message %s has no uuid_field", m.Desc.Name())
	}
	j.uuid = fieldByName(m, opts.GetUuidField())
	switch {
	case j.uuid == nil:
		return nil, optErrorf(m.Desc, "uuid_field %q is not a field of %s", opts.GetUuidField(), m.Desc.Name())
	case j.uuid.Desc.Kind() != protoreflect.BytesKind || j.uuid.Desc.Cardinality() == protoreflect.Repeated:
		return nil, errorf(j.uuid.Desc, "uuid_field %s must be a singular bytes field holding a 16-byte UUID, not %s",
			j.uuid.Desc.Name(), fieldKindString(j.uuid.Desc))
	case j.uuid.Oneof != nil && !j.uuid.Oneof.Desc.IsSynthetic():
		return nil, errorf(j.uuid.Desc, "uuid_field %s may not be a member of oneof %s", j.uuid.Desc.Name(), j.uuid.Oneof.Desc.Name())
	}
	for _, name := range opts.GetPartitionKey() {
		f := fieldByName(m, name)
		if f == nil {
			return nil, optErrorf(m.Desc, "partition_key %q is not a field of %s", name, m.Desc.Name())
		} else if err := checkKeyField(f, "partition_key"); err != nil {
			return nil, err
		}
		j.partitionKey = append(j.partitionKey, f)
	}
	if err := checkMethodCollisions(m, journalMethods(j)); err != nil {
		return nil, err
	}
	md.journals[m.Desc.FullName()] = j
	return j, nil
}

// journalMethods are the methods generated on a journal message.
func journalMethods(j *journalMsg) []string {
	names := []string{"GetUUID", "SetUUID", "NewAcknowledgement", "ProtoSize", "MarshalTo", "Unmarshal",
		"MarshalJSONTo", "MarshalJSON", "UnmarshalJSON"}
	if len(j.partitionKey) != 0 {
		names = append(names, "AppendPartitionKey")
	}
	return names
}

// checkMethodCollisions fails if protoc-gen-go generates a field or method
// of m having one of names.
func checkMethodCollisions(m *protogen.Message, names []string) error {
	taken := map[string]protoreflect.Descriptor{}
	for _, f := range m.Fields {
		d := protoreflect.Descriptor(f.Desc)
		if f.Oneof != nil && !f.Oneof.Desc.IsSynthetic() {
			taken[f.Oneof.GoName] = f.Oneof.Desc
			taken["Get"+f.Oneof.GoName] = f.Oneof.Desc
		} else {
			taken[f.GoName] = d
		}
		taken["Get"+f.GoName] = d
	}
	for _, name := range names {
		if d, ok := taken[name]; ok {
			return errorf(d, "%s collides with method %s generated by protoc-gen-gazconsumer on %s; rename it",
				d.Name(), name, m.Desc.Name())
		}
	}
	return nil
}

// table returns the table annotation of m, or nil if it has none.
func (md *model) table(m *protogen.Message) (*table, error) {
	if t, ok := md.tables[m.Desc.FullName()]; ok {
		return t, nil
	}
	opts := messageOptions(m).GetTable()
	if opts == nil {
		return nil, nil
	}
	t := &table{msg: m, name: opts.GetName()}
	if t.name == "" {
		t.name = string(m.Desc.FullName())
	}
	if len(opts.GetKey()) == 0 {
		return nil, optErrorf(m.Desc, "table %s has no key fields", m.Desc.Name())
	}
	seen := map[string]bool{}
	for _, k := range opts.GetKey() {
		f := fieldByName(m, k.GetField())
		if f == nil {
			return nil, optErrorf(m.Desc, "key field %q is not a field of %s", k.GetField(), m.Desc.Name())
		} else if seen[k.GetField()] {
			return nil, errorf(f.Desc, "key field %s is listed twice", k.GetField())
		} else if err := checkKeyField(f, "key field"); err != nil {
			return nil, err
		}
		seen[k.GetField()] = true
		t.key = append(t.key, keyField{field: f, desc: k.GetDescending()})
	}
	md.tables[m.Desc.FullName()] = t
	return t, nil
}

// checkKeyField fails if f cannot be part of an ordered key.
func checkKeyField(f *protogen.Field, what string) error {
	if f.Desc.IsList() || f.Desc.IsMap() {
		return errorf(f.Desc, "%s %s must be singular, not %s", what, f.Desc.Name(), fieldKindString(f.Desc))
	}
	if f.Oneof != nil && !f.Oneof.Desc.IsSynthetic() {
		return errorf(f.Desc, "%s %s may not be a member of oneof %s", what, f.Desc.Name(), f.Oneof.Desc.Name())
	}
	switch f.Desc.Kind() {
	case protoreflect.FloatKind, protoreflect.DoubleKind, protoreflect.GroupKind:
		return errorf(f.Desc, "%s %s has unsupported type %s (want an integer, bool, string, bytes, enum or google.protobuf.Timestamp)",
			what, f.Desc.Name(), fieldKindString(f.Desc))
	case protoreflect.MessageKind:
		if f.Desc.Message().FullName() != "google.protobuf.Timestamp" {
			return errorf(f.Desc, "%s %s has unsupported type %s (want an integer, bool, string, bytes, enum or google.protobuf.Timestamp)",
				what, f.Desc.Name(), fieldKindString(f.Desc))
		}
	}
	return nil
}

func fieldKindString(f protoreflect.FieldDescriptor) string {
	var s string
	switch f.Kind() {
	case protoreflect.MessageKind, protoreflect.GroupKind:
		s = string(f.Message().FullName())
	case protoreflect.EnumKind:
		s = string(f.Enum().FullName())
	default:
		s = f.Kind().String()
	}
	switch {
	case f.IsMap():
		return "map"
	case f.IsList():
		return "repeated " + s
	}
	return s
}

// resolve resolves a type name relative to the package of d.
func (md *model) resolve(d protoreflect.Descriptor, name string) *protogen.Message {
	if strings.HasPrefix(name, ".") {
		return md.messages[protoreflect.FullName(name[1:])]
	}
	for scope := d.ParentFile().Package(); ; scope = scope.Parent() {
		full := protoreflect.FullName(name)
		if scope != "" {
			full = scope.Append(protoreflect.Name(name))
			if strings.Contains(name, ".") {
				full = protoreflect.FullName(string(scope) + "." + name)
			}
		}
		if m, ok := md.messages[full]; ok {
			return m
		}
		if scope == "" {
			return nil
		}
	}
}

// consumer returns the consumer annotation of s, or nil if it has none.
func (md *model) consumer(s *protogen.Service) (*consumer, error) {
	opts := consumerOptions(s)
	if opts == nil {
		return nil, nil
	}
	c := &consumer{svc: s, opts: opts}
	if len(s.Methods) == 0 {
		return nil, optErrorf(s.Desc, "consumer %s has no handler rpcs", s.Desc.Name())
	}
	byInput := map[protoreflect.FullName]*protogen.Method{}
	for _, meth := range s.Methods {
		if meth.Desc.IsStreamingClient() || meth.Desc.IsStreamingServer() {
			return nil, errorf(meth.Desc, "handler %s may not stream", meth.Desc.Name())
		}
		j, err := md.journal(meth.Input)
		if err != nil {
			return nil, err
		} else if j == nil {
			return nil, errorf(meth.Desc, "handler %s consumes %s, which is not a journal message (annotate it with option (gazconsumer.v1.message).journal)",
				meth.Desc.Name(), meth.Input.Desc.FullName())
		} else if prev, ok := byInput[meth.Input.Desc.FullName()]; ok {
			return nil, errorf(meth.Desc, "handlers %s and %s both consume %s", prev.Desc.Name(), meth.Desc.Name(), meth.Input.Desc.FullName())
		} else if meth.GoName == "FinalizeTxn" {
			return nil, errorf(meth.Desc, "handler name FinalizeTxn is reserved")
		}
		byInput[meth.Input.Desc.FullName()] = meth
		c.handlers = append(c.handlers, handler{method: meth, journal: j})
	}
	types := map[string]*protogen.Method{}
	for _, h := range c.handlers {
		if prev, ok := types[h.journal.messageType]; ok {
			return nil, errorf(h.method.Desc, "handlers %s and %s consume messages of the same message_type %q",
				prev.Desc.Name(), h.method.Desc.Name(), h.journal.messageType)
		}
		types[h.journal.messageType] = h.method
	}
	seen := map[protoreflect.FullName]bool{}
	txnFields := map[string]bool{}
	for _, name := range opts.GetTables() {
		m := md.resolve(s.Desc, name)
		if m == nil {
			return nil, optErrorf(s.Desc, "table %q of consumer %s is not a known message", name, s.Desc.Name())
		}
		t, err := md.table(m)
		if err != nil {
			return nil, err
		} else if t == nil {
			return nil, optErrorf(s.Desc, "table %q of consumer %s: message %s has no (gazconsumer.v1.message).table option",
				name, s.Desc.Name(), m.Desc.FullName())
		} else if seen[m.Desc.FullName()] {
			return nil, optErrorf(s.Desc, "consumer %s lists table %s twice", s.Desc.Name(), m.Desc.FullName())
		}
		seen[m.Desc.FullName()] = true
		if txnReserved[m.GoIdent.GoName] || txnFields[m.GoIdent.GoName] {
			return nil, optErrorf(s.Desc, "table %s of consumer %s would be field %s of %sTxn, which is taken", m.Desc.FullName(), s.Desc.Name(), m.GoIdent.GoName, s.GoName)
		}
		txnFields[m.GoIdent.GoName] = true
		c.tables = append(c.tables, t)
	}
	seen = map[protoreflect.FullName]bool{}
	for _, p := range opts.GetPublishes() {
		m := md.resolve(s.Desc, p.GetMessage())
		if m == nil {
			return nil, optErrorf(s.Desc, "published message %q of consumer %s is not a known message", p.GetMessage(), s.Desc.Name())
		}
		j, err := md.journal(m)
		if err != nil {
			return nil, err
		} else if j == nil {
			return nil, optErrorf(s.Desc, "consumer %s publishes %s, which is not a journal message", s.Desc.Name(), m.Desc.FullName())
		} else if seen[m.Desc.FullName()] {
			return nil, optErrorf(s.Desc, "consumer %s publishes %s twice", s.Desc.Name(), m.Desc.FullName())
		}
		seen[m.Desc.FullName()] = true
		if txnFields["Publish"+m.GoIdent.GoName] {
			return nil, optErrorf(s.Desc, "consumer %s publishes two messages named %s", s.Desc.Name(), m.GoIdent.GoName)
		}
		txnFields["Publish"+m.GoIdent.GoName] = true
		sel := p.GetPartitions()
		if sel == "" {
			sel = labels.MessageType + "=" + j.messageType
		}
		if _, err := pb.ParseLabelSelector(sel); err != nil {
			return nil, optErrorf(s.Desc, "partitions %q of published message %s: %v", sel, m.Desc.FullName(), err)
		}
		c.publishes = append(c.publishes, publish{journal: j, selector: sel})
	}
	if err := checkShardDefaults(s, opts.GetShardDefaults()); err != nil {
		return nil, err
	}
	return c, nil
}

// checkTableNames fails if two tables of the generated files share a name.
func (md *model) checkTableNames() error {
	var all []*table
	for _, t := range md.tables {
		all = append(all, t)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].msg.Desc.FullName() < all[j].msg.Desc.FullName() })
	byName := map[string]*table{}
	for _, t := range all {
		if prev, ok := byName[t.name]; ok {
			return errorf(t.msg.Desc, "table name %q of %s is already the name of table %s", t.name, t.msg.Desc.FullName(), prev.msg.Desc.FullName())
		}
		byName[t.name] = t
	}
	return nil
}

// checkShardDefaults fails if the shard defaults of s are out of range.
func checkShardDefaults(s *protogen.Service, d *gcv1.ShardDefaults) error {
	if d == nil {
		return nil
	}
	for _, dur := range []struct {
		name string
		v    interface{ CheckValid() error }
		set  bool
	}{
		{"min_txn_duration", d.GetMinTxnDuration(), d.MinTxnDuration != nil},
		{"max_txn_duration", d.GetMaxTxnDuration(), d.MaxTxnDuration != nil},
	} {
		if !dur.set {
			continue
		}
		if err := dur.v.CheckValid(); err != nil {
			return optErrorf(s.Desc, "shard_defaults.%s: %v", dur.name, err)
		}
	}
	if d.GetMinTxnDuration().AsDuration() < 0 || d.GetMaxTxnDuration().AsDuration() < 0 {
		return optErrorf(s.Desc, "shard_defaults: transaction durations may not be negative")
	}
	if d.MaxTxnDuration != nil && d.MinTxnDuration != nil &&
		d.GetMinTxnDuration().AsDuration() > d.GetMaxTxnDuration().AsDuration() {
		return optErrorf(s.Desc, "shard_defaults: min_txn_duration %v exceeds max_txn_duration %v",
			d.GetMinTxnDuration().AsDuration(), d.GetMaxTxnDuration().AsDuration())
	}
	return nil
}
