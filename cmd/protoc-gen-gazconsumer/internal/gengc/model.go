package gengc

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/labels"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/internal/ownership"
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

// selector returns the label selector of the journals of j's messages: those
// labeled with its message type.
func (j *journalMsg) selector() string { return labels.MessageType + "=" + j.messageType }

// keyField is one field of a table's composite key.
type keyField struct {
	field *protogen.Field
	desc  bool
}

// presence reports whether the key field has presence: its key struct field
// is a pointer (or a nil-able slice), which is nil if the field is not set.
func (k keyField) presence() bool { return k.field.Desc.HasPresence() }

// table is a message annotated as a state table.
type table struct {
	msg  *protogen.Message
	name string
	key  []keyField
	ttl  time.Duration // Of the ttl option; zero if rows don't expire.
	// timer tells that the message is that of per-key timers (option
	// timer), whose schema is a table's.
	timer bool
}

// handler is one rpc of a consumer.
type handler struct {
	method    *protogen.Method
	journal   *journalMsg    // Nil for the handler of a timer.
	timer     *table         // The timer it handles, if it does.
	onFailure *failurePolicy // Of the rpc's (gazconsumer.v1.handler) option, if any.
}

// publish is one journal message published by a consumer.
type publish struct {
	journal  *journalMsg
	selector string
	index    int // Among the consumer's publishes.
}

// consumer is a service annotated as a consumer.
type consumer struct {
	svc       *protogen.Service
	opts      *gcv1.Consumer
	handlers  []handler
	tables    []*table
	tableAt   []int // Index of each table among the consumer's tables option.
	publishes []publish
	// owners holds the ownership of the rows of each of tables, and
	// timerOwners of each of timers.
	owners, timerOwners []ownership.Table
	// onFailure is the consumer's failure policy, if annotated.
	onFailure *failurePolicy
	// timers are the timers the consumer sets, at timerAt of its option,
	// and timerHandlers the handlers of their firings.
	timers        []*table
	timerAt       []int
	timerHandlers []handler
}

// fileModel is what is generated for one .proto file.
type fileModel struct {
	file      *protogen.File
	journals  []*journalMsg
	tables    []*table
	consumers []*consumer
	queries   []*queries
}

// empty reports whether nothing is generated for the file.
func (fm *fileModel) empty() bool {
	return len(fm.journals) == 0 && len(fm.tables) == 0 && len(fm.consumers) == 0 && len(fm.queries) == 0
}

// model resolves and validates the annotations of a request.
type model struct {
	messages map[protoreflect.FullName]*protogen.Message
	journals map[protoreflect.FullName]*journalMsg
	tables   map[protoreflect.FullName]*table
	timers   map[protoreflect.FullName]*table
	services map[protoreflect.FullName]*protogen.Service
	// files are the files to generate, by path.
	files []*fileModel
	// all are the files of the request, by path.
	all []*protogen.File
	// pkgNames are the Go package names of import paths.
	pkgNames map[protogen.GoImportPath]protogen.GoPackageName
}

// optionOf returns the option of d that is extension x, or nil if d has
// none.
func optionOf[T proto.Message](d protoreflect.Descriptor, x protoreflect.ExtensionType) T {
	opts, _ := proto.GetExtension(d.Options(), x).(T)
	return opts
}

func messageOptions(m *protogen.Message) *gcv1.MessageOptions {
	return optionOf[*gcv1.MessageOptions](m.Desc, gcv1.E_Message)
}

func consumerOptions(s *protogen.Service) *gcv1.Consumer {
	return optionOf[*gcv1.Consumer](s.Desc, gcv1.E_Consumer)
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

// inOneof reports whether f is a member of a oneof declared as such: not
// of the synthetic oneof of a proto3 optional field.
func inOneof(f *protogen.Field) bool { return f.Oneof != nil && !f.Oneof.Desc.IsSynthetic() }

// streams reports whether rpc m streams its requests or its responses.
func streams(m *protogen.Method) bool {
	return m.Desc.IsStreamingClient() || m.Desc.IsStreamingServer()
}

// fieldNames returns the names of fs, as "a, b".
func fieldNames(fs []*protogen.Field) string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Desc.Name()))
	}
	return strings.Join(out, ", ")
}

// buildModel resolves the annotations of every file of gen, and validates
// those of the files to generate. Files are taken in the order of their
// paths, whatever their order in the request.
func buildModel(gen *protogen.Plugin) (*model, error) {
	md := &model{
		messages: map[protoreflect.FullName]*protogen.Message{},
		journals: map[protoreflect.FullName]*journalMsg{},
		tables:   map[protoreflect.FullName]*table{},
		timers:   map[protoreflect.FullName]*table{},
		services: map[protoreflect.FullName]*protogen.Service{},
		pkgNames: map[protogen.GoImportPath]protogen.GoPackageName{},
		all:      slices.Clone(gen.Files),
	}
	slices.SortFunc(md.all, func(a, b *protogen.File) int { return cmp.Compare(a.Desc.Path(), b.Desc.Path()) })
	for _, f := range md.all {
		md.pkgNames[f.GoImportPath] = f.GoPackageName
		walkMessages(f.Messages, func(m *protogen.Message) { md.messages[m.Desc.FullName()] = m })
		for _, s := range f.Services {
			md.services[s.Desc.FullName()] = s
		}
	}
	for _, f := range md.all {
		if !f.Generate {
			continue
		}
		fm := &fileModel{file: f}
		var err error
		walkMessages(f.Messages, func(m *protogen.Message) {
			if err != nil {
				return
			}
			if err = checkOptionEnums(m.Desc, messageOptions(m)); err != nil {
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
			if err != nil {
				return
			}
			if t, err = md.timer(m); err == nil && t != nil {
				fm.tables = append(fm.tables, t)
			}
		})
		if err != nil {
			return nil, err
		}
		for _, s := range f.Services {
			if err := checkOptionEnums(s.Desc, consumerOptions(s)); err != nil {
				return nil, err
			} else if consumerOptions(s) == nil {
				if err := checkHandlerOptions(s); err != nil {
					return nil, err
				}
			}
			q, err := md.queries(f, s)
			if err != nil {
				return nil, err
			} else if q != nil {
				fm.queries = append(fm.queries, q)
				continue
			}
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
	} else if err := md.checkMessageTypes(); err != nil {
		return nil, err
	}
	return md, nil
}

// checkOptionEnums fails if an enum field of opts, the gazconsumer option
// of d, holds a number its enum doesn't define: it has no Go name.
func checkOptionEnums(d protoreflect.Descriptor, opts proto.Message) error {
	if opts == nil {
		return nil
	}
	var walk func(m protoreflect.Message, path []int32) error
	walk = func(m protoreflect.Message, path []int32) error {
		var err error
		m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
			p := append(slices.Clone(path), int32(fd.Number()))
			check := func(v protoreflect.Value, p []int32) error {
				switch fd.Kind() {
				case protoreflect.EnumKind:
					if fd.Enum().Values().ByNumber(v.Enum()) == nil {
						return optErrorf(d, p, "%s: %d is not a value of %s", fd.Name(), v.Enum(), fd.Enum().FullName())
					}
				case protoreflect.MessageKind:
					return walk(v.Message(), p)
				}
				return nil
			}
			switch {
			case fd.IsList():
				for i := 0; i < v.List().Len() && err == nil; i++ {
					err = check(v.List().Get(i), append(slices.Clone(p), int32(i)))
				}
			case !fd.IsMap():
				err = check(v, p)
			}
			return err == nil
		})
		return err
	}
	return walk(opts.ProtoReflect(), nil)
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
		return nil, optErrorf(m.Desc, at(optJournal, optMessageType), "message_type %q is not a valid journal label value: %v", j.messageType, err)
	}
	switch opts.GetFraming() {
	case gcv1.Framing_FRAMING_UNSPECIFIED, gcv1.Framing_FRAMING_PROTOBUF:
		j.contentType = labels.ContentType_ProtoFixed
	case gcv1.Framing_FRAMING_JSON:
		j.contentType = labels.ContentType_JSONLines
	default:
		return nil, optErrorf(m.Desc, at(optJournal, optFraming), "unknown framing %v", opts.GetFraming())
	}
	if opts.GetUuidField() == "" {
		return nil, optErrorf(m.Desc, at(optJournal), "journal message %s has no uuid_field", m.Desc.Name())
	}
	uuidAt := at(optJournal, optUUIDField)
	j.uuid = fieldByName(m, opts.GetUuidField())
	switch {
	case j.uuid == nil:
		return nil, optErrorf(m.Desc, uuidAt, "uuid_field %q is not a field of %s", opts.GetUuidField(), m.Desc.Name())
	case j.uuid.Desc.Kind() != protoreflect.BytesKind || j.uuid.Desc.Cardinality() == protoreflect.Repeated:
		return nil, optErrorf(m.Desc, uuidAt, "uuid_field %s (%s) must be a singular bytes field holding a 16-byte UUID, not %s",
			j.uuid.Desc.Name(), posOf(j.uuid.Desc), fieldKindString(j.uuid.Desc))
	case inOneof(j.uuid):
		return nil, optErrorf(m.Desc, uuidAt, "uuid_field %s (%s) may not be a member of oneof %s", j.uuid.Desc.Name(), posOf(j.uuid.Desc), j.uuid.Oneof.Desc.Name())
	}
	for i, name := range opts.GetPartitionKey() {
		keyAt := at(optJournal, optPartitionKey, int32(i))
		f := fieldByName(m, name)
		if f == nil {
			return nil, optErrorf(m.Desc, keyAt, "partition_key %q is not a field of %s", name, m.Desc.Name())
		} else if err := checkKeyField(m.Desc, keyAt, f, "partition_key"); err != nil {
			return nil, err
		}
		j.partitionKey = append(j.partitionKey, f)
	}
	md.journals[m.Desc.FullName()] = j
	return j, nil
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
		return nil, optErrorf(m.Desc, at(optTable), "table %s has no key fields", m.Desc.Name())
	}
	var err error
	if t.key, err = keyOf(m, opts.GetKey(), optTable, optKey); err != nil {
		return nil, err
	}
	if v := opts.GetTtl(); v != "" {
		ttl, err := time.ParseDuration(v)
		if err != nil {
			return nil, optErrorf(m.Desc, at(optTable, optTTL), "ttl %q of table %s is not a duration (e.g. \"720h\"): %v", v, m.Desc.Name(), err)
		} else if ttl <= 0 {
			return nil, optErrorf(m.Desc, at(optTable, optTTL), "ttl %q of table %s must be positive", v, m.Desc.Name())
		}
		t.ttl = ttl
	}
	md.tables[m.Desc.FullName()] = t
	return t, nil
}

// keyOf returns the key fields keys of m, listed in its option at path
// (opt, key).
func keyOf(m *protogen.Message, keys []*gcv1.KeyField, opt, key int32) ([]keyField, error) {
	var out []keyField
	for i, k := range keys {
		keyAt := at(opt, key, int32(i), optKeyField)
		f := fieldByName(m, k.GetField())
		if f == nil {
			return nil, optErrorf(m.Desc, keyAt, "key field %q is not a field of %s", k.GetField(), m.Desc.Name())
		} else if slices.ContainsFunc(out, func(k keyField) bool { return k.field == f }) {
			return nil, optErrorf(m.Desc, keyAt, "key field %s is listed twice", k.GetField())
		} else if err := checkKeyField(m.Desc, keyAt, f, "key field"); err != nil {
			return nil, err
		}
		out = append(out, keyField{field: f, desc: k.GetDescending()})
	}
	return out, nil
}

// isTimestamp reports whether f is a google.protobuf.Timestamp, encoded as a
// message or (in an edition, with features.message_encoding = DELIMITED) as
// a group: the Go field is a *timestamppb.Timestamp either way.
func isTimestamp(f protoreflect.FieldDescriptor) bool {
	return (f.Kind() == protoreflect.MessageKind || f.Kind() == protoreflect.GroupKind) &&
		f.Message().FullName() == "google.protobuf.Timestamp"
}

// checkKeyField fails if f, listed at path of the option of m, cannot be
// part of an ordered key.
func checkKeyField(m protoreflect.Descriptor, path []int32, f *protogen.Field, what string) error {
	fail := func(format string, args ...any) error {
		return optErrorf(m, path, "%s %s (%s) %s", what, f.Desc.Name(), posOf(f.Desc), fmt.Sprintf(format, args...))
	}
	if f.Desc.IsList() || f.Desc.IsMap() {
		return fail("must be singular, not %s", fieldKindString(f.Desc))
	}
	if inOneof(f) {
		return fail("may not be a member of oneof %s", f.Oneof.Desc.Name())
	}
	const want = "(want an integer, bool, string, bytes, enum or google.protobuf.Timestamp)"
	switch f.Desc.Kind() {
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return fail("has unsupported type %s: floating-point values have no order-preserving key encoding %s", fieldKindString(f.Desc), want)
	case protoreflect.MessageKind, protoreflect.GroupKind:
		if !isTimestamp(f.Desc) {
			return fail("has unsupported type %s: of messages, only google.protobuf.Timestamp has an order-preserving key encoding %s", fieldKindString(f.Desc), want)
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

// resolve resolves a message name relative to the package of d.
func (md *model) resolve(d protoreflect.Descriptor, name string) *protogen.Message {
	return resolveIn(md.messages, d, name)
}

// resolveService resolves a service name relative to the package of d.
func (md *model) resolveService(d protoreflect.Descriptor, name string) *protogen.Service {
	return resolveIn(md.services, d, name)
}

// resolveIn resolves name, as protobuf resolves a type name relative to the
// package of d (a leading dot makes it fully qualified), among byName. It
// returns nil if byName has no such name.
func resolveIn[T any](byName map[protoreflect.FullName]*T, d protoreflect.Descriptor, name string) *T {
	if strings.HasPrefix(name, ".") {
		return byName[protoreflect.FullName(name[1:])]
	}
	for scope := d.ParentFile().Package(); ; scope = scope.Parent() {
		full := protoreflect.FullName(name)
		if scope != "" {
			full = protoreflect.FullName(string(scope) + "." + name)
		}
		if v, ok := byName[full]; ok {
			return v
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
		return nil, optErrorf(s.Desc, nil, "consumer %s has no handler rpcs", s.Desc.Name())
	}
	if err := md.consumerTimers(c); err != nil {
		return nil, err
	}
	byInput := map[protoreflect.FullName]*protogen.Method{}
	byType := map[string]*protogen.Method{}
	for _, meth := range s.Methods {
		if streams(meth) {
			return nil, errorf(meth.Desc, "handler %s may not stream", meth.Desc.Name())
		}
		if t, err := md.timer(meth.Input); err != nil {
			return nil, err
		} else if t != nil {
			if err := c.timerHandler(meth, t, byInput); err != nil {
				return nil, err
			}
			continue
		}
		j, err := md.journal(meth.Input)
		if err != nil {
			return nil, err
		} else if j == nil {
			return nil, errorf(meth.Desc, "handler %s consumes %s, which is not a journal message (annotate it with option (gazconsumer.v1.message).journal)",
				meth.Desc.Name(), meth.Input.Desc.FullName())
		} else if prev, ok := byInput[meth.Input.Desc.FullName()]; ok {
			return nil, errorf(meth.Desc, "handlers %s and %s both consume %s", prev.Desc.Name(), meth.Desc.Name(), meth.Input.Desc.FullName())
		} else if prev, ok := byType[j.messageType]; ok {
			return nil, errorf(meth.Desc, "handlers %s and %s consume messages of the same message_type %q",
				prev.Desc.Name(), meth.Desc.Name(), j.messageType)
		}
		byInput[meth.Input.Desc.FullName()] = meth
		byType[j.messageType] = meth
		c.handlers = append(c.handlers, handler{method: meth, journal: j})
	}
	for i, name := range opts.GetTables() {
		tableAt := at(optTables, int32(i))
		m := md.resolve(s.Desc, name)
		if m == nil {
			return nil, optErrorf(s.Desc, tableAt, "table %q of consumer %s is not a known message", name, s.Desc.Name())
		}
		t, err := md.table(m)
		if err != nil {
			return nil, err
		} else if t == nil {
			return nil, optErrorf(s.Desc, tableAt, "table %q of consumer %s: message %s has no (gazconsumer.v1.message).table option",
				name, s.Desc.Name(), m.Desc.FullName())
		} else if slices.Contains(c.tables, t) {
			return nil, optErrorf(s.Desc, tableAt, "consumer %s lists table %s twice", s.Desc.Name(), m.Desc.FullName())
		}
		c.tables = append(c.tables, t)
		c.tableAt = append(c.tableAt, i)
	}
	for i, p := range opts.GetPublishes() {
		pubAt := at(optPublishes, int32(i))
		m := md.resolve(s.Desc, p.GetMessage())
		if m == nil {
			return nil, optErrorf(s.Desc, append(pubAt, optPublishMsg), "published message %q of consumer %s is not a known message", p.GetMessage(), s.Desc.Name())
		}
		j, err := md.journal(m)
		if err != nil {
			return nil, err
		} else if j == nil {
			return nil, optErrorf(s.Desc, append(pubAt, optPublishMsg), "consumer %s publishes %s, which is not a journal message", s.Desc.Name(), m.Desc.FullName())
		} else if slices.ContainsFunc(c.publishes, func(p publish) bool { return p.journal == j }) {
			return nil, optErrorf(s.Desc, append(pubAt, optPublishMsg), "consumer %s publishes %s twice", s.Desc.Name(), m.Desc.FullName())
		}
		sel := p.GetPartitions()
		if sel == "" {
			sel = j.selector()
		}
		if _, err := pb.ParseLabelSelector(sel); err != nil {
			return nil, optErrorf(s.Desc, append(pubAt, optPublishParts), "partitions %q of published message %s: %v", sel, m.Desc.FullName(), err)
		}
		c.publishes = append(c.publishes, publish{journal: j, selector: sel, index: i})
	}
	if err := checkShardDefaults(s, opts.GetShardDefaults()); err != nil {
		return nil, err
	} else if err := failurePolicies(c); err != nil {
		return nil, err
	} else if err := checkExpiryHandlers(c); err != nil {
		return nil, err
	} else if err := c.checkTimerHandlers(); err != nil {
		return nil, err
	}
	own, err := ownership.Of(s.Desc, messageResolver(md.messages))
	if err != nil {
		return nil, err
	} else if err := own.Err(); err != nil && opts.GetRescalable() {
		return nil, err
	}
	c.owners, c.timerOwners = own.Tables, own.Timers
	return c, nil
}

// messageResolver is an ownership.Resolver of messages by full name.
type messageResolver map[protoreflect.FullName]*protogen.Message

// FindDescriptorByName returns the message named name.
func (r messageResolver) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if m, ok := r[name]; ok {
		return m.Desc, nil
	}
	return nil, fmt.Errorf("no message %s", name)
}

// checkTableNames fails if two tables of the generated files share a name.
func (md *model) checkTableNames() error {
	byName := map[string]*table{}
	for _, fm := range md.files {
		for _, t := range fm.allTables() {
			if prev, ok := byName[t.name]; ok && prev != t {
				return optErrorf(t.msg.Desc, at(optTable, optTableName), "table name %q of %s is already the name of table %s (%s)",
					t.name, t.msg.Desc.FullName(), prev.msg.Desc.FullName(), optPos(prev.msg.Desc, optTable, optTableName))
			}
			byName[t.name] = t
		}
	}
	return nil
}

// allTables returns the tables of fm and those its consumers hold.
func (fm *fileModel) allTables() []*table {
	out := slices.Clone(fm.tables)
	for _, c := range fm.consumers {
		for _, t := range c.tables {
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// checkMessageTypes fails if two journal messages of one Go package share a
// message_type: NewMessage of the package could not tell them apart.
func (md *model) checkMessageTypes() error {
	type key struct {
		pkg protogen.GoImportPath
		mt  string
	}
	seen := map[key]*journalMsg{}
	for _, fm := range md.files {
		for _, j := range fm.journals {
			k := key{fm.file.GoImportPath, j.messageType}
			if prev, ok := seen[k]; ok {
				return optErrorf(j.msg.Desc, at(optJournal, optMessageType), "message_type %q of %s is also that of %s (%s), of the same Go package: NewMessage could not tell them apart",
					j.messageType, j.msg.Desc.FullName(), prev.msg.Desc.FullName(), optPos(prev.msg.Desc, optJournal, optMessageType))
			}
			seen[k] = j
		}
	}
	return nil
}

// checkShardDefaults fails if the shard defaults of s are out of range.
func checkShardDefaults(s *protogen.Service, d *gcv1.ShardDefaults) error {
	if d == nil {
		return nil
	}
	for i, dur := range []struct {
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
			return optErrorf(s.Desc, at(optShardDefs, int32(i+1)), "shard_defaults.%s: %v", dur.name, err)
		}
	}
	if d.GetMinTxnDuration().AsDuration() < 0 || d.GetMaxTxnDuration().AsDuration() < 0 {
		return optErrorf(s.Desc, at(optShardDefs), "shard_defaults: transaction durations may not be negative")
	}
	if d.MaxTxnDuration != nil && d.MinTxnDuration != nil &&
		d.GetMinTxnDuration().AsDuration() > d.GetMaxTxnDuration().AsDuration() {
		return optErrorf(s.Desc, at(optShardDefs), "shard_defaults: min_txn_duration %v exceeds max_txn_duration %v",
			d.GetMinTxnDuration().AsDuration(), d.GetMaxTxnDuration().AsDuration())
	}
	return nil
}
