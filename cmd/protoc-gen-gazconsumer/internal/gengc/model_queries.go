package gengc

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/internal/ownership"
	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// This file checks the annotations of queries services, and builds their
// model: which consumer's tables each rpc reads, and which fields of its
// request and response play which role. queries.go generates their code.

// queries is a service annotated as a queries service: its rpcs read the
// tables of a consumer (package runtime/query serves and calls them).
type queries struct {
	svc      *protogen.Service
	file     *protogen.File // Declaring svc.
	consumer *consumer
	// routeBy is the first journal message the consumer reads having a
	// partition key: a request carrying its partition key fields is
	// answered by the shard of their partition, among the journals of
	// selector. Nil if the consumer reads none: every shard answers.
	routeBy  *journalMsg
	selector string
	reads    []*read
}

// read is an rpc of a queries service.
type read struct {
	method *protogen.Method
	table  *table
	kind   gcv1.ReadKind
	// key holds the request's fields of the table's key fields: all of
	// them for a GET, a leading prefix for a SCAN.
	key []*protogen.Field
	// partition holds the request's fields of the partition key of the
	// consumer's sources, or nil if it carries none.
	partition []*protogen.Field
	// row is the response's field holding the row of a GET, or nil if
	// the response is the row.
	row *protogen.Field
	// Of a SCAN: the response's rows and next page token, the request's
	// limit (nil if none), page token and range bounds (nil if none).
	rows, next, limit, token, start, end *protogen.Field
	defaultLimit, maxLimit               int
}

// Field numbers of the queries annotations.
const (
	optQueriesConsumer = 1 // Queries.consumer
	optReadTable       = 1 // Read.table
	optReadKind        = 2 // Read.kind
	optReadRowField    = 3
	optReadRowsField   = 4
	optReadLimitField  = 5
	optReadTokenField  = 6
	optReadNextField   = 7
	optReadStartField  = 8
	optReadEndField    = 9
	optReadDefault     = 10
	optReadMax         = 11
)

func queriesOptions(s *protogen.Service) *gcv1.Queries {
	return optionOf[*gcv1.Queries](s.Desc, gcv1.E_Queries)
}

func readOptions(m *protogen.Method) *gcv1.Read {
	return optionOf[*gcv1.Read](m.Desc, gcv1.E_Read)
}

// queriesErrorf returns an error positioned at path within the queries
// option of s.
func queriesErrorf(s *protogen.Service, path []int32, format string, args ...any) error {
	return errorAt(extPos(s.Desc, serviceOptionsField, int32(gcv1.E_Queries.Field), path...), format, args...)
}

// readErrorf returns an error positioned at path within the read option of
// m.
func readErrorf(m *protogen.Method, path []int32, format string, args ...any) error {
	return errorAt(extPos(m.Desc, methodOptionsField, int32(gcv1.E_Read.Field), path...), format, args...)
}

// queries returns the queries annotation of s, or nil if it has none.
func (md *model) queries(f *protogen.File, s *protogen.Service) (*queries, error) {
	opts := queriesOptions(s)
	if opts == nil {
		return nil, nil
	}
	if consumerOptions(s) != nil {
		return nil, queriesErrorf(s, nil, "service %s is both a consumer and a queries service: declare its queries in a service of their own", s.Desc.Name())
	}
	target := md.resolveService(s.Desc, opts.GetConsumer())
	switch {
	case opts.GetConsumer() == "":
		return nil, queriesErrorf(s, nil, "queries service %s names no consumer", s.Desc.Name())
	case target == nil:
		return nil, queriesErrorf(s, at(optQueriesConsumer), "consumer %q of queries service %s is not a known service", opts.GetConsumer(), s.Desc.Name())
	case consumerOptions(target) == nil:
		return nil, queriesErrorf(s, at(optQueriesConsumer), "service %s, which queries service %s reads, is not a consumer (it has no (gazconsumer.v1.consumer) option)",
			target.Desc.FullName(), s.Desc.Name())
	}
	c, err := md.consumer(target)
	if err != nil {
		return nil, err
	}
	q := &queries{svc: s, file: f, consumer: c}
	for _, h := range c.handlers {
		if len(h.journal.partitionKey) != 0 {
			q.routeBy = h.journal
			q.selector = h.journal.selector()
			break
		}
	}
	if len(s.Methods) == 0 {
		return nil, queriesErrorf(s, nil, "queries service %s has no rpcs", s.Desc.Name())
	}
	for _, m := range s.Methods {
		r, err := md.read(q, m)
		if err != nil {
			return nil, err
		}
		q.reads = append(q.reads, r)
	}
	return q, nil
}

// sameType reports whether fields a and b have one type: kind, and enum or
// message type.
func sameType(a, b protoreflect.FieldDescriptor) bool { return ownership.SameType(a, b) }

// optionalField returns the field of msg that opt names, or that def names
// if opt is empty (nil if msg has none); an error if opt names no field.
func optionalField(m *protogen.Method, msg *protogen.Message, opt, def string, path int32) (*protogen.Field, error) {
	if opt == "" {
		return fieldByName(msg, def), nil
	}
	f := fieldByName(msg, opt)
	if f == nil {
		return nil, readErrorf(m, at(path), "%q is not a field of %s", opt, msg.Desc.FullName())
	}
	return f, nil
}

// isToken reports whether f can hold a page token: a singular string or
// bytes field.
func isToken(f *protogen.Field) bool {
	return !f.Desc.IsList() && !f.Desc.IsMap() && (f.Desc.Kind() == protoreflect.StringKind || f.Desc.Kind() == protoreflect.BytesKind)
}

// read returns rpc m of queries service q.
func (md *model) read(q *queries, m *protogen.Method) (*read, error) {
	if streams(m) {
		return nil, errorf(m.Desc, "rpc %s of queries service %s may not stream", m.Desc.Name(), q.svc.Desc.Name())
	}
	opts := readOptions(m)
	if opts == nil {
		return nil, errorf(m.Desc, "rpc %s of queries service %s has no (gazconsumer.v1.read) option", m.Desc.Name(), q.svc.Desc.Name())
	}
	if err := checkOptionEnums(m.Desc, opts); err != nil {
		return nil, err
	}
	tm := md.resolve(q.svc.Desc, opts.GetTable())
	var t *table
	if tm != nil {
		t = md.tables[tm.Desc.FullName()]
	}
	switch {
	case opts.GetTable() == "":
		return nil, readErrorf(m, nil, "rpc %s reads no table", m.Desc.Name())
	case t == nil || !slices.Contains(q.consumer.tables, t):
		return nil, readErrorf(m, at(optReadTable), "table %q of rpc %s is not a table of consumer %s", opts.GetTable(), m.Desc.Name(), q.consumer.svc.Desc.FullName())
	case t.msg.GoIdent.GoImportPath != q.file.GoImportPath:
		return nil, readErrorf(m, at(optReadTable), "table %s is of Go package %s, not of queries service %s's %s: declare the service in the table's Go package",
			t.msg.Desc.FullName(), t.msg.GoIdent.GoImportPath, q.svc.Desc.Name(), q.file.GoImportPath)
	}
	r := &read{method: m, table: t, kind: opts.GetKind()}
	req := m.Input
	if r.kind != gcv1.ReadKind_READ_KIND_GET && r.kind != gcv1.ReadKind_READ_KIND_SCAN {
		return nil, readErrorf(m, at(optReadKind), "rpc %s has no kind: READ_KIND_GET or READ_KIND_SCAN", m.Desc.Name())
	}
	// The request's fields with a role of their own, then key fields.
	role := map[*protogen.Field]bool{}
	if r.kind == gcv1.ReadKind_READ_KIND_SCAN {
		var err error
		if r.limit, err = optionalField(m, req, opts.GetLimitField(), "limit", optReadLimitField); err != nil {
			return nil, err
		}
		if r.token, err = optionalField(m, req, opts.GetPageTokenField(), "page_token", optReadTokenField); err != nil {
			return nil, err
		}
		if r.start, err = optionalField(m, req, opts.GetStartField(), "", optReadStartField); err != nil {
			return nil, err
		}
		if r.end, err = optionalField(m, req, opts.GetEndField(), "", optReadEndField); err != nil {
			return nil, err
		}
		switch {
		case r.token == nil:
			return nil, readErrorf(m, at(optReadTokenField), "request %s of SCAN rpc %s has no page token field (page_token, or as page_token_field names)", req.Desc.FullName(), m.Desc.Name())
		case !isToken(r.token):
			return nil, errorf(r.token.Desc, "page token field %s of %s must be a singular string or bytes field, not %s", r.token.Desc.Name(), req.Desc.FullName(), fieldKindString(r.token.Desc))
		}
		if r.limit != nil {
			switch r.limit.Desc.Kind() {
			case protoreflect.Int32Kind, protoreflect.Int64Kind, protoreflect.Sint32Kind, protoreflect.Sint64Kind,
				protoreflect.Sfixed32Kind, protoreflect.Sfixed64Kind, protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
				if !r.limit.Desc.IsList() {
					break
				}
				fallthrough
			default:
				return nil, errorf(r.limit.Desc, "limit field %s of %s must be a singular integer field of at most 32 bits unsigned or 64 signed, not %s",
					r.limit.Desc.Name(), req.Desc.FullName(), fieldKindString(r.limit.Desc))
			}
			role[r.limit] = true
		}
		role[r.token] = true
		for _, f := range []*protogen.Field{r.start, r.end} {
			if f == nil {
				continue
			} else if f.Desc.IsList() || f.Desc.Kind() != protoreflect.MessageKind || f.Desc.Message().FullName() != t.msg.Desc.FullName() {
				return nil, errorf(f.Desc, "range field %s of %s must be a singular field of the row message %s, not %s",
					f.Desc.Name(), req.Desc.FullName(), t.msg.Desc.FullName(), fieldKindString(f.Desc))
			} else if role[f] {
				return nil, errorf(f.Desc, "field %s of %s has two roles in rpc %s", f.Desc.Name(), req.Desc.FullName(), m.Desc.Name())
			}
			role[f] = true
		}
		r.defaultLimit, r.maxLimit = int(opts.GetDefaultLimit()), int(opts.GetMaxLimit())
		switch {
		case r.maxLimit == 0:
			r.maxLimit = max(1000, r.defaultLimit)
		case r.defaultLimit == 0:
			r.defaultLimit = min(100, r.maxLimit)
		}
		if r.defaultLimit == 0 {
			r.defaultLimit = 100
		}
		if r.defaultLimit > r.maxLimit {
			return nil, readErrorf(m, at(optReadDefault), "default_limit %d of rpc %s exceeds its max_limit %d", r.defaultLimit, m.Desc.Name(), r.maxLimit)
		}
	}
	// Key fields, by name.
	for i, k := range t.key {
		f := fieldByName(req, string(k.field.Desc.Name()))
		if f == nil || role[f] {
			if r.kind == gcv1.ReadKind_READ_KIND_GET {
				return nil, readErrorf(m, nil, "request %s of GET rpc %s has no field %s, key field of table %s: a GET gives every key field",
					req.Desc.FullName(), m.Desc.Name(), k.field.Desc.Name(), t.msg.Desc.FullName())
			}
			for _, later := range t.key[i+1:] {
				if g := fieldByName(req, string(later.field.Desc.Name())); g != nil && !role[g] {
					return nil, errorf(g.Desc, "field %s of %s gives key field %s of table %s, but no field gives key field %s before it: a SCAN gives a leading prefix of the key",
						g.Desc.Name(), req.Desc.FullName(), later.field.Desc.Name(), t.msg.Desc.FullName(), k.field.Desc.Name())
				}
			}
			break
		}
		if !sameType(f.Desc, k.field.Desc) || f.Desc.HasPresence() != k.field.Desc.HasPresence() {
			return nil, errorf(f.Desc, "field %s of %s is %s%s, but key field %s of table %s (%s) is %s%s: a request's key field is of the key field's type",
				f.Desc.Name(), req.Desc.FullName(), presenceWord(f), fieldKindString(f.Desc), k.field.Desc.Name(), t.msg.Desc.FullName(),
				posOf(k.field.Desc), presenceWord(k.field), fieldKindString(k.field.Desc))
		}
		if inOneof(f) {
			return nil, errorf(f.Desc, "key field %s of %s may not be a member of oneof %s", f.Desc.Name(), req.Desc.FullName(), f.Oneof.Desc.Name())
		}
		r.key = append(r.key, f)
		role[f] = true
	}
	// The partition key of the consumer's sources.
	if q.routeBy != nil {
		var carried, missing []string
		for _, pk := range q.routeBy.partitionKey {
			f := fieldByName(req, string(pk.Desc.Name()))
			if f == nil {
				missing = append(missing, string(pk.Desc.Name()))
				continue
			} else if !sameType(f.Desc, pk.Desc) || inOneof(f) {
				return nil, errorf(f.Desc, "field %s of %s is named as partition key field %s of %s (%s), the consumer's source, but is %s, not %s: it would route requests to the wrong shard",
					f.Desc.Name(), req.Desc.FullName(), pk.Desc.Name(), q.routeBy.msg.Desc.FullName(), posOf(pk.Desc), fieldKindString(f.Desc), fieldKindString(pk.Desc))
			}
			carried = append(carried, string(f.Desc.Name()))
			r.partition = append(r.partition, f)
			role[f] = true
		}
		if len(carried) != 0 && len(missing) != 0 {
			return nil, readErrorf(m, nil, "request %s of rpc %s carries %s of the partition key (%s) of %s, but not %s: carry all of its fields, to be routed to a shard, or none, to be answered by every shard",
				req.Desc.FullName(), m.Desc.Name(), strings.Join(carried, ", "), fieldNames(q.routeBy.partitionKey), q.routeBy.msg.Desc.FullName(), strings.Join(missing, ", "))
		}
		if len(carried) != 0 {
			for _, h := range q.consumer.handlers {
				if j := h.journal; len(j.partitionKey) != 0 && !samePartitionKey(j, q.routeBy) {
					return nil, readErrorf(m, nil, "request %s of rpc %s carries the partition key of %s, but consumer %s also reads %s, partitioned by (%s): its shards hold no one key's rows",
						req.Desc.FullName(), m.Desc.Name(), q.routeBy.msg.Desc.FullName(), q.consumer.svc.Desc.Name(), j.msg.Desc.FullName(), fieldNames(j.partitionKey))
				}
			}
		}
	}
	for _, f := range req.Fields {
		if !role[f] {
			return nil, errorf(f.Desc, "field %s of request %s of rpc %s is neither a key field of table %s, a field of the partition key, nor one the read option names",
				f.Desc.Name(), req.Desc.FullName(), m.Desc.Name(), t.msg.Desc.FullName())
		}
	}
	return r, md.readResponse(r, opts)
}

// readResponse resolves the response fields of r.
func (md *model) readResponse(r *read, opts *gcv1.Read) error {
	m, resp, t := r.method, r.method.Output, r.table
	ofRow := func(f *protogen.Field) bool {
		return f.Desc.Kind() == protoreflect.MessageKind && f.Desc.Message().FullName() == t.msg.Desc.FullName() && !f.Desc.IsMap()
	}
	// pick returns the field opt names, or the one field of resp that want
	// accepts.
	pick := func(opt string, path int32, want func(*protogen.Field) bool, what string) (*protogen.Field, error) {
		if opt != "" {
			f := fieldByName(resp, opt)
			if f == nil {
				return nil, readErrorf(m, at(path), "%q is not a field of %s", opt, resp.Desc.FullName())
			} else if !want(f) {
				return nil, readErrorf(m, at(path), "field %s of %s is not %s", opt, resp.Desc.FullName(), what)
			}
			return f, nil
		}
		var found []*protogen.Field
		for _, f := range resp.Fields {
			if want(f) {
				found = append(found, f)
			}
		}
		switch len(found) {
		case 1:
			return found[0], nil
		case 0:
			return nil, readErrorf(m, nil, "response %s of rpc %s has no field that is %s", resp.Desc.FullName(), m.Desc.Name(), what)
		}
		return nil, readErrorf(m, nil, "response %s of rpc %s has %d fields that are %s: name one (rows_field or row_field)", resp.Desc.FullName(), m.Desc.Name(), len(found), what)
	}
	var err error
	if r.kind == gcv1.ReadKind_READ_KIND_GET {
		if resp.Desc.FullName() == t.msg.Desc.FullName() {
			if opts.GetRowField() != "" {
				return readErrorf(m, at(optReadRowField), "rpc %s answers the row %s itself: it has no row_field", m.Desc.Name(), t.msg.Desc.FullName())
			}
			return nil
		}
		r.row, err = pick(opts.GetRowField(), optReadRowField, func(f *protogen.Field) bool {
			return ofRow(f) && !f.Desc.IsList() && !inOneof(f)
		}, "a singular field of "+string(t.msg.Desc.FullName()))
		return err
	}
	if r.rows, err = pick(opts.GetRowsField(), optReadRowsField, func(f *protogen.Field) bool { return ofRow(f) && f.Desc.IsList() },
		"a repeated field of "+string(t.msg.Desc.FullName())); err != nil {
		return err
	}
	if r.next, err = optionalField(m, resp, opts.GetNextPageTokenField(), "next_page_token", optReadNextField); err != nil {
		return err
	} else if r.next == nil {
		return readErrorf(m, at(optReadNextField), "response %s of SCAN rpc %s has no next page token field (next_page_token, or as next_page_token_field names)", resp.Desc.FullName(), m.Desc.Name())
	} else if r.next.Desc.Kind() != r.token.Desc.Kind() || !isToken(r.next) {
		return errorf(r.next.Desc, "next page token field %s of %s must be a singular %s, as page token field %s of %s is, not %s",
			r.next.Desc.Name(), resp.Desc.FullName(), r.token.Desc.Kind(), r.token.Desc.Name(), m.Input.Desc.FullName(), fieldKindString(r.next.Desc))
	} else if inOneof(r.next) {
		return errorf(r.next.Desc, "next page token field %s of %s may not be a member of oneof %s", r.next.Desc.Name(), resp.Desc.FullName(), r.next.Oneof.Desc.Name())
	}
	return nil
}

// samePartitionKey reports whether a and b are partitioned by fields of
// the same names and types.
func samePartitionKey(a, b *journalMsg) bool {
	return slices.EqualFunc(a.partitionKey, b.partitionKey, func(x, y *protogen.Field) bool {
		return x.Desc.Name() == y.Desc.Name() && sameType(x.Desc, y.Desc)
	})
}

func presenceWord(f *protogen.Field) string {
	if f.Desc.HasPresence() && f.Desc.Kind() != protoreflect.MessageKind && f.Desc.Kind() != protoreflect.GroupKind {
		return "optional "
	}
	return ""
}
