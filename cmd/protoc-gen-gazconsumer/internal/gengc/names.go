package gengc

import (
	"fmt"
	"go/token"
	"go/types"
	"path"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/gofeaturespb"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// This file is the names table of the generator. Every identifier the
// plugin generates (types, functions, methods, fields, locals, the names of
// imported packages, the packages and directories of harnesses and
// scaffolds) is declared here, in the scope it belongs to, beside the names
// protoc-gen-go declares in the same scopes. A name declared twice in a
// scope, or a Go keyword, is an error positioned in the .proto file at what
// makes the plugin generate it, naming what declared it first: the plugin
// never writes Go that doesn't compile for a clash of names.

// origin is what declares a name: a phrase describing it, and its position,
// if it comes from a .proto file.
type origin struct {
	what string
	pos  *position
}

// from returns the origin what, at p.
func from(p position, format string, args ...any) origin {
	return origin{what: fmt.Sprintf(format, args...), pos: &p}
}

// fixed returns the origin of a name the plugin or a package it builds on
// always declares.
func fixed(format string, args ...any) origin {
	return origin{what: fmt.Sprintf(format, args...)}
}

// scope is a Go scope, whose names must be distinct: a package block, the
// fields and methods of a type, or a set of import paths or directories.
type scope struct {
	what  string
	names map[string]origin
}

func newScope(format string, args ...any) *scope {
	return &scope{what: fmt.Sprintf(format, args...), names: map[string]origin{}}
}

// declare declares name in s. It fails, positioned at o, if s has name
// already.
func (s *scope) declare(name string, o origin) error {
	if prev, ok := s.names[name]; ok {
		at, fix := "", "rename it"
		if prev.pos != nil {
			at, fix = " ("+prev.pos.String()+")", "rename one of them"
		}
		return errorAt(*o.pos, "%s is named %s, as is %s%s, in %s; %s", o.what, name, prev.what, at, s.what, fix)
	}
	s.names[name] = o
	return nil
}

// reserve declares name in s unless s has it: for names declared by others
// (protoc-gen-go, the runtime), whose own clashes are not ours to report.
func (s *scope) reserve(name string, o origin) {
	if _, ok := s.names[name]; !ok {
		s.names[name] = o
	}
}

// has reports whether s has name.
func (s *scope) has(name string) bool {
	_, ok := s.names[name]
	return ok
}

// predeclared are Go's predeclared identifiers (types, constants, zero
// value and functions), which generated files use.
var predeclared = types.Universe.Names()

// isReserved reports whether name is a Go keyword or predeclared
// identifier, which no name of an import or a local may shadow.
func isReserved(name string) bool {
	return token.IsKeyword(name) || slices.Contains(predeclared, name)
}

// uniqueName returns name, or name followed by the smallest number from 1
// making it not taken.
func uniqueName(name string, taken func(string) bool) string {
	unique := name
	for i := 1; taken(unique); i++ {
		unique = fmt.Sprintf("%s%d", name, i)
	}
	return unique
}

// namer picks names of one scope: names not otherwise taken, nor Go
// keywords or predeclared identifiers, nor those it picked before.
type namer struct {
	taken  func(string) bool
	picked map[string]bool
}

// newNamer returns a namer of the scope where taken reports the names taken.
func newNamer(taken func(string) bool) *namer {
	return &namer{taken: taken, picked: map[string]bool{}}
}

// pick returns name, or name numbered as uniqueName numbers it, as the first
// name free, and takes it.
func (n *namer) pick(name string) string {
	unique := uniqueName(name, func(s string) bool { return n.picked[s] || n.taken(s) || isReserved(s) })
	n.picked[unique] = true
	return unique
}

// needsAlias reports whether the package of import path p, declaring
// package declared, is imported as name by an import spec naming it: unless
// name is both its declared name and the last element of its path.
func needsAlias(p, declared, name string) bool {
	return name != declared || name != path.Base(p)
}

// sanitize turns s into a Go identifier, as protogen names packages.
func sanitize(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(r)
		} else {
			b.WriteRune('_')
		}
	}
	out := b.String()
	if r, _ := utf8.DecodeRuneInString(out); out == "" || unicode.IsDigit(r) {
		out = "_" + out
	}
	if token.IsKeyword(out) {
		out += "_"
	}
	return out
}

// names is the names table of a request.
type names struct {
	md *model
	// pkgs are the package blocks of the Go packages generated into.
	pkgs map[protogen.GoImportPath]*scope
	// pggImports are, by Go package, the names protoc-gen-go may give the
	// packages its files import (it numbers names taken twice).
	pggImports map[protogen.GoImportPath]map[string]string
	// harnesses are the names of the test harness of each consumer.
	harnesses map[*consumer]*harnessNames
}

// harnessNames are the names of a consumer's test harness.
type harnessNames struct {
	pkg    string
	path   protogen.GoImportPath
	scope  *scope   // Package block.
	tables []string // Harness fields, by table of the consumer.
	inputs []string // Feed methods, by handler of the consumer.
}

// Names of the runtime's and consumertest's types, which generated types
// embed: checked against the packages by TestReservedNames.
var (
	// txnReserved are the fields and methods of a generated …Txn that are
	// those of the runtime.Txn it embeds.
	txnReserved = []string{"Txn", "Shard", "Store", "Envelope", "Publish", "Now"}
	// harnessReserved are the fields and methods of a generated Harness
	// that are those of the *consumertest.Harness it embeds, and its own.
	harnessReserved = []string{
		"Harness", "Published", "NewProducer", "Feed", "Redeliver", "Hold", "Release", "Commit", "TryCommit",
		"Crash", "Checkpoint", "State", "Spec", "Now", "DeadLetters", "Advance", "Sleep",
	}
	// producerReserved are the fields and methods of a generated Producer
	// that are those of the *consumertest.Producer it embeds.
	producerReserved = []string{"Producer", "Publish", "Commit"}
	// journalReserved are the methods of every message of protoc-gen-go.
	journalReserved = []string{"Reset", "String", "ProtoMessage", "ProtoReflect", "Descriptor"}
)

// Locals, parameters and receivers of generated code, which the names of
// imported packages must not be.
var (
	genLocals = []string{"x", "u", "b", "w", "p", "spec", "kv", "r", "k", "c", "tx", "msg", "handler", "stores", "journals",
		"v", "row", "rows", "next", "start", "end", "err", "ctx", "req", "resp", "opts", "token", "h", "e", "ok", "any"}
	harnessLocals = []string{"t", "handler", "opts", "h", "p", "msg", "stores", "journals"}
)

// newNames declares every name generated for md, and returns the table.
func newNames(md *model) (*names, error) {
	nt := &names{
		md:         md,
		pkgs:       map[protogen.GoImportPath]*scope{},
		pggImports: map[protogen.GoImportPath]map[string]string{},
		harnesses:  map[*consumer]*harnessNames{},
	}
	byPath := map[string]*protogen.File{}
	for _, f := range md.all {
		byPath[f.Desc.Path()] = f
	}
	for _, fm := range md.files {
		if fm.empty() {
			continue
		}
		pkg := fm.file.GoImportPath
		if nt.pkgs[pkg] != nil {
			continue
		}
		s := newScope("Go package %s", string(pkg))
		imports := map[string]string{}
		for _, f := range md.all {
			if f.GoImportPath != pkg {
				continue
			}
			reserveProtocGenGo(s, f)
			for _, p := range []string{"protoreflect", "protoimpl", "reflect", "sync", "unsafe", "proto"} {
				imports[p] = "a package protoc-gen-go's " + f.Desc.Path() + " may import"
			}
			for i := 0; i < f.Desc.Imports().Len(); i++ {
				if dep := byPath[f.Desc.Imports().Get(i).Path()]; dep != nil && dep.GoImportPath != pkg {
					imports[sanitize(path.Base(string(dep.GoImportPath)))] = "package " + string(dep.GoImportPath) + ", which protoc-gen-go's " + f.Desc.Path() + " may import"
				}
			}
		}
		nt.pkgs[pkg], nt.pggImports[pkg] = s, imports
	}
	harnessPaths := newScope("the Go packages of this request")
	for _, f := range md.all {
		harnessPaths.reserve(string(f.GoImportPath), from(position{File: f.Desc.Path(), Line: 1, Col: 1}, "the Go package of %s", f.Desc.Path()))
	}
	declaredNewMessage := map[protogen.GoImportPath]bool{}
	for _, fm := range md.files {
		pkg := fm.file.GoImportPath
		declare := func(name string, o origin) error {
			if err := nt.pkgs[pkg].declare(name, o); err != nil {
				return err
			}
			if what, ok := nt.pggImports[pkg][strings.TrimRight(name, "0123456789")]; ok {
				return errorAt(*o.pos, "%s is named %s, as may be %s; rename it", o.what, name, what)
			}
			return nil
		}
		// declareEach declares the names of one declaration of a .proto
		// file, at p, each given with what it is: "the schema" of "table
		// acme.v1.Spend".
		declareEach := func(p position, of string, names ...[2]string) error {
			for _, n := range names {
				if err := declare(n[0], from(p, "%s of %s", n[1], of)); err != nil {
					return err
				}
			}
			return nil
		}
		if len(fm.journals) != 0 && !declaredNewMessage[pkg] {
			declaredNewMessage[pkg] = true
			p := optPos(fm.journals[0].msg.Desc, optJournal)
			if err := declare("NewMessage", from(p, "the NewMessage function of the journal messages of %s", string(pkg))); err != nil {
				return nil, err
			} else if err := declare(messageTypesVar, from(p, "the message types of NewMessage")); err != nil {
				return nil, err
			}
		}
		for _, j := range fm.journals {
			if err := declare(publisherCtorName(j), from(optPos(j.msg.Desc, optJournal), "the Publisher constructor of journal message %s", j.msg.Desc.FullName())); err != nil {
				return nil, err
			} else if err := declareJournal(j); err != nil {
				return nil, err
			}
		}
		for _, t := range fm.tables {
			p := optPos(t.msg.Desc, optTable)
			n := tableNamesOf(t)
			if err := declareEach(p, "table "+string(t.msg.Desc.FullName()),
				[2]string{n.key, "the key type"}, [2]string{n.table, "the table type"}, [2]string{n.ctor, "the constructor"}, [2]string{n.schema, "the schema"},
			); err != nil {
				return nil, err
			} else if err := declareKey(t); err != nil {
				return nil, err
			}
		}
		for _, c := range fm.consumers {
			p := optPos(c.svc.Desc)
			n := consumerNamesOf(c)
			if err := declareEach(p, "consumer "+string(c.svc.Desc.FullName()),
				[2]string{n.handler, "the handler interface"}, [2]string{n.txn, "the transaction type"}, [2]string{n.app, "the Application type"},
				[2]string{n.ctor, "the Application constructor"}, [2]string{n.desc, "the description"},
			); err != nil {
				return nil, err
			} else if err := declareConsumer(c); err != nil {
				return nil, err
			}
			h, err := declareHarness(fm, c, harnessPaths)
			if err != nil {
				return nil, err
			}
			nt.harnesses[c] = h
		}
		for _, q := range fm.queries {
			p := extPos(q.svc.Desc, serviceOptionsField, int32(gcv1.E_Queries.Field))
			n := queriesNamesOf(q)
			if err := declareEach(p, "queries service "+string(q.svc.Desc.FullName()),
				[2]string{n.desc, "the description"}, [2]string{n.client, "the client type"}, [2]string{n.ctor, "the client constructor"},
			); err != nil {
				return nil, err
			} else if err := declareQueries(q); err != nil {
				return nil, err
			}
		}
	}
	return nt, nil
}

// reserveProtocGenGo reserves in s the package-level names protoc-gen-go
// declares for f.
func reserveProtocGenGo(s *scope, f *protogen.File) {
	pgg := func(d protoreflect.Descriptor, format string, args ...any) origin {
		return from(posOf(d), "protoc-gen-go's "+format, args...)
	}
	s.reserve(f.GoDescriptorIdent.GoName, from(position{File: f.Desc.Path(), Line: 1, Col: 1}, "protoc-gen-go's file descriptor of %s", f.Desc.Path()))
	var enums func([]*protogen.Enum)
	enums = func(es []*protogen.Enum) {
		for _, e := range es {
			o := pgg(e.Desc, "type of enum %s", e.Desc.FullName())
			s.reserve(e.GoIdent.GoName, o)
			s.reserve(e.GoIdent.GoName+"_name", o)
			s.reserve(e.GoIdent.GoName+"_value", o)
			for _, v := range e.Values {
				s.reserve(v.GoIdent.GoName, pgg(v.Desc, "constant of enum value %s", v.Desc.FullName()))
			}
		}
	}
	extensions := func(xs []*protogen.Extension) {
		for _, x := range xs {
			s.reserve("E_"+x.GoIdent.GoName, pgg(x.Desc, "variable of extension %s", x.Desc.FullName()))
		}
	}
	enums(f.Enums)
	extensions(f.Extensions)
	walkMessages(f.Messages, func(m *protogen.Message) {
		s.reserve(m.GoIdent.GoName, pgg(m.Desc, "type of message %s", m.Desc.FullName()))
		if m.APILevel != gofeaturespb.GoFeatures_API_OPEN {
			s.reserve(m.GoIdent.GoName+"_builder", pgg(m.Desc, "builder type of message %s", m.Desc.FullName()))
		}
		enums(m.Enums)
		extensions(m.Extensions)
		for _, o := range m.Oneofs {
			if o.Desc.IsSynthetic() {
				continue
			}
			s.reserve("is"+o.GoIdent.GoName, pgg(o.Desc, "interface of oneof %s", o.Desc.FullName()))
			if m.APILevel != gofeaturespb.GoFeatures_API_OPEN {
				s.reserve(o.GoIdent.GoName+"_case", pgg(o.Desc, "case type of oneof %s", o.Desc.FullName()))
				s.reserve(o.GoIdent.GoName+"_not_set_case", pgg(o.Desc, "case of oneof %s", o.Desc.FullName()))
			}
			for _, fld := range o.Fields {
				s.reserve(fld.GoIdent.GoName, pgg(fld.Desc, "wrapper type of oneof field %s", fld.Desc.FullName()))
				if m.APILevel != gofeaturespb.GoFeatures_API_OPEN {
					s.reserve(fld.GoIdent.GoName+"_case", pgg(fld.Desc, "case of oneof field %s", fld.Desc.FullName()))
				}
			}
		}
	})
}

// methodScope returns the scope of the fields and methods protoc-gen-go
// declares on the Go type of m.
func methodScope(m *protogen.Message) *scope {
	s := newScope("the Go type %s of message %s", m.GoIdent.GoName, m.Desc.FullName())
	for _, name := range journalReserved {
		s.reserve(name, fixed("protoc-gen-go's method %s", name))
	}
	open := m.APILevel == gofeaturespb.GoFeatures_API_OPEN
	for _, f := range m.Fields {
		o := from(posOf(f.Desc), "protoc-gen-go's accessor of field %s", f.Desc.Name())
		if inOneof(f) {
			oo := from(posOf(f.Oneof.Desc), "protoc-gen-go's accessor of oneof %s", f.Oneof.Desc.Name())
			if open {
				s.reserve(f.Oneof.GoName, oo)
				s.reserve("Get"+f.Oneof.GoName, oo)
			} else {
				for _, meth := range []string{"Has", "Clear", "Which"} {
					s.reserve(f.Oneof.MethodName(meth), oo)
				}
			}
		} else if m.APILevel != gofeaturespb.GoFeatures_API_OPAQUE {
			s.reserve(f.GoName, from(posOf(f.Desc), "protoc-gen-go's struct field of field %s", f.Desc.Name()))
		}
		get, compat := f.MethodName("Get")
		s.reserve(get, o)
		if compat != "" {
			s.reserve(compat, o)
		}
		if !open {
			for _, meth := range []string{"Set", "Has", "Clear"} {
				if name, _ := f.MethodName(meth); name != "" {
					s.reserve(name, o)
				}
			}
		}
	}
	return s
}

// declareJournal declares the methods generated on journal message j.
func declareJournal(j *journalMsg) error {
	s := methodScope(j.msg)
	p := optPos(j.msg.Desc, optJournal)
	for _, name := range journalMethods {
		at := p
		if name == "GetUUID" || name == "SetUUID" {
			at = optPos(j.msg.Desc, optJournal, optUUIDField)
		}
		if err := s.declare(name, from(at, "a method generated on journal message %s", j.msg.Desc.Name())); err != nil {
			return err
		}
	}
	if len(j.partitionKey) != 0 {
		if err := s.declare("AppendPartitionKey", from(optPos(j.msg.Desc, optJournal, optPartitionKey),
			"a method generated on journal message %s", j.msg.Desc.Name())); err != nil {
			return err
		}
	}
	return nil
}

// journalMethods are the methods generated on every journal message.
var journalMethods = []string{"GetUUID", "SetUUID", "NewAcknowledgement", "ProtoSize", "MarshalTo", "Unmarshal",
	"MarshalJSONTo", "MarshalJSON", "UnmarshalJSON"}

// declareKey declares the fields of the key struct of t.
func declareKey(t *table) error {
	n := tableNamesOf(t)
	s := newScope("struct %s", n.key)
	for i, k := range t.key {
		if err := s.declare(k.field.GoName, from(optPos(t.msg.Desc, optTable, optKey, int32(i)), "key field %s", k.field.Desc.Name())); err != nil {
			return err
		}
	}
	return nil
}

// declareConsumer declares the methods of the handler interface of c, and
// the fields and methods of its transaction.
func declareConsumer(c *consumer) error {
	n := consumerNamesOf(c)
	iface := newScope("interface %s", n.handler)
	iface.reserve("FinalizeTxn", fixed("the FinalizeTxn method of every handler"))
	for _, h := range c.handlers {
		if err := iface.declare(h.method.GoName, from(posOf(h.method.Desc), "the handler method of rpc %s", h.method.Desc.Name())); err != nil {
			return err
		}
	}
	txn := newScope("struct %s", n.txn)
	for _, name := range txnReserved {
		txn.reserve(name, fixed("%s of the runtime.Txn that %s embeds", name, n.txn))
	}
	for i, t := range c.tables {
		if err := txn.declare(t.msg.GoIdent.GoName, from(optPos(c.svc.Desc, optTables, int32(c.tableAt[i])), "the field of table %s", t.msg.Desc.FullName())); err != nil {
			return err
		}
	}
	for i, t := range c.timers {
		if err := txn.declare(tableNamesOf(t).table, from(optPos(c.svc.Desc, optTimers, int32(c.timerAt[i])), "the field of timer %s", t.msg.Desc.FullName())); err != nil {
			return err
		}
	}
	for _, h := range c.timerHandlers {
		if err := iface.declare(h.method.GoName, from(posOf(h.method.Desc), "the handler method of rpc %s", h.method.Desc.Name())); err != nil {
			return err
		}
	}
	for _, p := range c.publishes {
		if err := txn.declare(publishName(p), from(optPos(c.svc.Desc, optPublishes, int32(p.index)), "the method publishing %s", p.journal.msg.Desc.FullName())); err != nil {
			return err
		}
	}
	return nil
}

// declareHarness declares the names of the test harness of consumer c of
// fm, and its import path in paths.
func declareHarness(fm *fileModel, c *consumer, paths *scope) (*harnessNames, error) {
	h := &harnessNames{pkg: harnessPackage(c)}
	h.path = protogen.GoImportPath(string(fm.file.GoImportPath) + "/" + h.pkg)
	p := optPos(c.svc.Desc)
	if err := paths.declare(string(h.path), from(p, "the package of the test harness of consumer %s", c.svc.Desc.FullName())); err != nil {
		return nil, err
	}
	h.scope = newScope("package %s", string(h.path))
	for _, name := range []string{"Harness", "Published", "Producer", "New"} {
		h.scope.reserve(name, fixed("the harness's %s", name))
	}
	// Fields and feed methods take the names of their tables and types,
	// but for those of the embedded harness and producer, and of each
	// other (two inputs of different packages may share a Go name).
	members := newScope("struct Harness")
	for _, name := range append(slices.Clone(harnessReserved), producerReserved...) {
		members.reserve(name, fixed("%s of the harness", name))
	}
	taken := members.has
	for i, t := range c.tables {
		name := t.msg.GoIdent.GoName
		if taken(name) {
			name = uniqueName(name+"Table", taken)
		}
		if err := members.declare(name, from(optPos(c.svc.Desc, optTables, int32(c.tableAt[i])), "the harness field of table %s", t.msg.Desc.FullName())); err != nil {
			return nil, err
		}
		h.tables = append(h.tables, name)
	}
	for _, hd := range c.handlers {
		name := hd.method.Input.GoIdent.GoName
		if taken(name) {
			name = uniqueName("Feed"+name, taken)
		}
		if err := members.declare(name, from(posOf(hd.method.Desc), "the harness's feed method of %s", hd.method.Input.Desc.FullName())); err != nil {
			return nil, err
		}
		h.inputs = append(h.inputs, name)
	}
	return h, nil
}

// tableNames are the package-level names generated for a table.
type tableNames struct{ key, table, ctor, schema string }

func tableNamesOf(t *table) tableNames {
	n := t.msg.GoIdent.GoName
	if t.timer {
		return tableNames{key: n + "Key", table: n + "Timers", ctor: "New" + n + "Timers", schema: "gazconsumer" + n + "Timers"}
	}
	return tableNames{key: n + "Key", table: n + "Table", ctor: "New" + n + "Table", schema: "gazconsumer" + n + "Table"}
}

// consumerNames are the package-level names generated for a consumer.
type consumerNames struct{ handler, txn, app, ctor, desc string }

func consumerNamesOf(c *consumer) consumerNames {
	s := c.svc.GoName
	return consumerNames{handler: s + "Handler", txn: s + "Txn", app: s + "Application", ctor: "New" + s + "Application",
		desc: "gazconsumer" + s + "Consumer"}
}

// queriesNames are the package-level names generated for a queries service.
type queriesNames struct{ desc, client, ctor string }

func queriesNamesOf(q *queries) queriesNames {
	s := q.svc.GoName
	return queriesNames{desc: "gazconsumer" + s + "Service", client: s + "Client", ctor: "New" + s + "Client"}
}

// declareQueries declares the methods of the client of q.
func declareQueries(q *queries) error {
	n := queriesNamesOf(q)
	s := newScope("struct %s", n.client)
	for _, r := range q.reads {
		if err := s.declare(r.method.GoName, from(posOf(r.method.Desc), "the client method of rpc %s", r.method.Desc.Name())); err != nil {
			return err
		}
	}
	return nil
}

// publisherCtorName is the name of the constructor of the Publisher of j.
func publisherCtorName(j *journalMsg) string { return "New" + j.msg.GoIdent.GoName + "Publisher" }

// messageTypesVar is the package-level variable of NewMessage's types.
const messageTypesVar = "gazconsumerMessageTypes"

// publishName is the name of the Txn method publishing p.
func publishName(p publish) string { return "Publish" + p.journal.msg.GoIdent.GoName }

// scaffoldPackage returns the Go package name of the scaffold of c, and the
// name of its directory: its lower-cased service name.
func scaffoldPackage(c *consumer) string { return strings.ToLower(c.svc.GoName) }

// harnessPackage returns the Go package name of the test harness of c: that
// of its scaffold, then "test" (which no Go keyword ends with).
func harnessPackage(c *consumer) string { return scaffoldPackage(c) + "test" }
