package main

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
)

// A randomSample is a set of random, valid, annotated .proto files, of
// several Go packages: syntaxes proto2 and proto3 and edition 2023, nested
// messages, keys of every type with and without presence, and names chosen
// to clash with one another, with Go keywords and predeclared identifiers,
// with the names of the packages generated code imports, and with the
// locals and methods of generated code. The plugin must reject it, with an
// error positioned in a .proto file, or generate Go that compiles.
type randomSample struct {
	name    string
	files   map[string]string // By path.
	paths   []string          // In the order the request lists them.
	goPaths map[string]string // Go import paths of the files, by path.
}

// Pools of names: plain ones, and those that clash with what generated
// code declares or uses, taken less often.
var (
	randomMessageNames = [2][]string{
		{"Order", "Event", "Table", "Key", "Commit", "Spec", "Feed", "Harness", "Select", "Type", "Func", "Map", "Range",
			"Message", "Handler", "Codec", "String", "Error", "Int", "Producer", "Published", "New", "Runtime", "Fmt", "Reset",
			"Descriptor", "Counter", "Go", "Interface", "Row", "Sum", "Total", "Default", "Nil", "Append", "Len", "Any"},
		{"NewMessage", "Store", "Shard", "Txn", "Envelope", "Publish", "OrderKey", "OrderTable", "CounterTxn", "CounterHandler"},
	}
	randomFieldNames = [2][]string{
		{"type", "func", "select", "range", "map_", "chan", "go", "string", "error", "len", "x", "b", "k", "r", "c", "u", "w",
			"msg", "kv", "spec", "tx", "handler", "stores", "journals", "reset", "descriptor", "name", "id", "value", "count", "at",
			"day", "kind", "level", "shard", "store", "envelope", "publish", "txn", "key", "table", "state", "size_cache",
			"unknown_fields", "uuid2", "default", "nil"},
		{"marshal_to", "get_uuid", "proto_size", "unmarshal", "new_acknowledgement", "set_uuid",
			"SizeVT", "MarshalVT", "UnmarshalVT", "MarshalToSizedBufferVT"},
	}
	randomServiceNames = [2][]string{
		{"Counter", "Runtime", "Store", "Harness", "Watcher", "counter", "Event", "Ledger", "Default", "String"},
		{"Select", "Main", "Type", "Go", "Map"},
	}
	randomDirs = []string{"store", "runtime", "table", "message", "msg", "fmt", "codec", "keyenc", "io", "time", "protocol",
		"testing", "errors", "h", "t", "x", "handler", "spec", "kv", "consumertest", "v1", "api", "pb", "pc", "labels", "bufio",
		"protojson", "protowire", "timestamppb", "gazconsumerv1", "runtimetest", "stores", "journals", "producer", "p",
		"protohelpers", "binary", "utf8", "math", "unsafe", "protoimpl"}
	// randomKeyKinds are the types of key fields.
	randomKeyKinds = []string{"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64", "sfixed32",
		"sfixed64", "bool", "string", "bytes", "ENUM", "google.protobuf.Timestamp"}
	// randomValueKinds are the types of other fields.
	randomValueKinds = []string{"double", "float", "string", "int64", "repeated string", "map<string, int64>", "bytes", "ENUM",
		"repeated int32", "repeated double", "sint32", "fixed32", "sfixed64", "bool", "uint32", "map<int32, bytes>",
		"google.protobuf.Timestamp", "repeated google.protobuf.Timestamp", "google.protobuf.Duration",
		"MSG", "repeated MSG", "map<string, MSG>", "map<uint64, google.protobuf.Timestamp>", "repeated ENUM", "map<sint32, ENUM>",
		"repeated sint64", "repeated fixed32", "repeated sfixed64", "repeated bool", "repeated float", "repeated uint64",
		"repeated bytes", "map<bool, string>", "map<fixed64, double>"}
	// randomScalarKinds are the types of extensions and of the fields of
	// groups.
	randomScalarKinds = []string{"int32", "sint64", "uint64", "fixed32", "sfixed64", "double", "float", "bool", "string", "bytes", "ENUM"}
)

// pick returns a name of pool: one that clashes, one time in clashOdds.
func pick(r *rand.Rand, pool [2][]string) string {
	const clashOdds = 8
	if r.IntN(clashOdds) == 0 {
		return pool[1][r.IntN(len(pool[1]))]
	}
	return pool[0][r.IntN(len(pool[0]))]
}

// randomFile is a .proto file being generated.
type randomFile struct {
	path, pkg, syntax string
	goPackage         string
	imports           []string
	body              strings.Builder
	// journals and tables are the full names of the journal and table
	// messages declared, by package-relative name.
	journals, tables []string
	enum             string // Full name of the file's enum, if any.
	// keys are the declarations of the key fields of the file's tables,
	// in key order, and partitionKeys those of the partition keys of its
	// journal messages, by package-relative name: a queries service copies
	// them into its requests.
	keys, partitionKeys map[string][]fieldDecl
	// msgs are the full names (with a leading dot) of the messages declared
	// so far, and imported those of the files rf imports, which fields
	// may be of.
	msgs, imported []string
	// extends are the extend blocks of the file, and groups counts its
	// groups, which names them.
	extends strings.Builder
	groups  int
	index   int // Of the file in its package, which names its groups.
}

// ref is a message of a package, by package-relative name.
type ref struct{ pkg, name string }

// fieldDecl is the declaration of a field: its name, and its line.
type fieldDecl struct{ name, decl string }

// renumbered returns the declaration of d numbered n.
func (d fieldDecl) renumbered(n int) string {
	return regexp.MustCompile(` = \d+`).ReplaceAllString(d.decl, fmt.Sprintf(" = %d", n))
}

// newRandomSample returns the sample of r named name.
func newRandomSample(r *rand.Rand, name string) randomSample {
	s := randomSample{name: name, files: map[string]string{}, goPaths: map[string]string{}}
	var files []*randomFile
	dirs := slices.Clone(randomDirs)
	r.Shuffle(len(dirs), func(i, j int) { dirs[i], dirs[j] = dirs[j], dirs[i] })
	for p := range 1 + r.IntN(3) {
		pkg := fmt.Sprintf("%s.p%d.v1", name, p)
		dir := dirs[p]
		goName := dir
		if r.IntN(3) == 0 {
			goName = randomDirs[r.IntN(len(randomDirs))] // Maybe the name of another package's directory.
		}
		goPackage := fmt.Sprintf("example.test/golden/%s/%s;%s", name, dir, goName)
		usedMsgs := map[string]bool{}
		for f := range 1 + r.IntN(2) {
			rf := &randomFile{
				path:          fmt.Sprintf("%s/p%d/f%d.proto", name, p, f),
				pkg:           pkg,
				syntax:        []string{"proto2", "proto3", "2023"}[r.IntN(3)],
				goPackage:     goPackage,
				keys:          map[string][]fieldDecl{},
				partitionKeys: map[string][]fieldDecl{},
				index:         f,
			}
			if rf.syntax == "2023" && r.IntN(4) == 0 {
				rf.body.WriteString("option features.(pb.go).api_level = " + []string{"API_OPAQUE", "API_HYBRID"}[r.IntN(2)] + ";\n")
				rf.imports = append(rf.imports, "google/protobuf/go_features.proto")
			}
			// Files may import those before them.
			for _, other := range files {
				if r.IntN(2) == 0 {
					rf.imports = append(rf.imports, other.path)
				}
			}
			rf.generate(r, usedMsgs, files)
			files = append(files, rf)
		}
	}
	for _, rf := range files {
		s.files[rf.path] = rf.render()
		s.paths = append(s.paths, rf.path)
		s.goPaths[rf.path], _, _ = strings.Cut(rf.goPackage, ";")
	}
	return s
}

// visible returns the files rf imports, and itself.
func (rf *randomFile) visible(files []*randomFile) []*randomFile {
	out := []*randomFile{rf}
	for _, f := range files {
		if slices.Contains(rf.imports, f.path) {
			out = append(out, f)
		}
	}
	return out
}

// field returns the declaration of a field of type typ, named name and
// numbered n, with presence or not as the file's syntax allows, and perhaps
// a default or another encoding of lists. In typ, ENUM stands for the
// file's enum, and MSG for a message of the file or of one it imports.
func (rf *randomFile) field(r *rand.Rand, typ, name string, n int, key bool) string {
	var label string
	var opts []string
	typ = strings.ReplaceAll(typ, "ENUM", rf.enum)
	isRef := strings.Contains(typ, "MSG")
	typ = strings.ReplaceAll(typ, "MSG", rf.msgRef(r))
	repeated := strings.HasPrefix(typ, "repeated ") || strings.HasPrefix(typ, "map<")
	elem := strings.TrimPrefix(typ, "repeated ")
	message := !strings.HasPrefix(typ, "map<") && (isRef || strings.HasPrefix(elem, "google.protobuf."))
	packable := strings.HasPrefix(typ, "repeated ") && !message && elem != "string" && elem != "bytes"
	switch rf.syntax {
	case "proto2":
		if !repeated {
			label = []string{"optional ", "required "}[r.IntN(2)]
			if !key {
				label = "optional "
			}
			if label == "optional " && !message && r.IntN(4) == 0 {
				opts = append(opts, "default = "+rf.defaultOf(r, typ))
			}
		}
		if packable && r.IntN(2) == 0 {
			opts = append(opts, "packed = true")
		}
	case "proto3":
		if !repeated && !message && r.IntN(3) == 0 {
			label = "optional "
		}
		if packable && r.IntN(2) == 0 {
			opts = append(opts, "packed = false")
		}
	case "2023":
		if !repeated && !message && r.IntN(2) == 0 {
			opts = append(opts, "features.field_presence = IMPLICIT") // The file's enum is open.
		}
		if message && r.IntN(3) == 0 {
			opts = append(opts, "features.message_encoding = DELIMITED")
		}
		if packable && r.IntN(3) == 0 {
			opts = append(opts, "features.repeated_field_encoding = EXPANDED")
		}
	}
	var o string
	if len(opts) != 0 {
		o = " [" + strings.Join(opts, ", ") + "]"
	}
	return fmt.Sprintf("  %s%s %s = %d%s;\n", label, typ, name, n, o)
}

// msgRef returns the full name of a message a field of rf may be of: one
// declared in rf so far (the message being declared among them), or in a
// file rf imports.
func (rf *randomFile) msgRef(r *rand.Rand) string {
	all := append(slices.Clone(rf.msgs), rf.imported...)
	return all[r.IntN(len(all))]
}

// defaultOf returns a default value of a field of type typ, a scalar, in
// a proto2 file.
func (rf *randomFile) defaultOf(r *rand.Rand, typ string) string {
	var pool []string
	switch typ {
	case "int32", "int64", "sint32", "sint64", "sfixed32", "sfixed64":
		pool = []string{"-7", "42", "0", "-2147483648"}
	case "uint32", "uint64", "fixed32", "fixed64":
		pool = []string{"7", "0", "4294967295"}
	case "double", "float":
		pool = []string{"-0.5", "inf", "-inf", "nan", "1e10", "-0"}
	case "bool":
		pool = []string{"true", "false"}
	case "string":
		pool = []string{`"d\"q é"`, `""`}
	case "bytes":
		pool = []string{`"\001b\377"`, `""`}
	default: // The file's enum.
		pool = []string{strings.ToUpper(rf.enum) + "_TWO", strings.ToUpper(rf.enum) + "_UNSPECIFIED"}
	}
	return pool[r.IntN(len(pool))]
}

// group returns the declaration of a group (proto2) numbered n, with label
// (empty in a oneof), indented by indent, whose fields are of random
// scalar types, and perhaps a group nested in it, if depth allows.
func (rf *randomFile) group(r *rand.Rand, label, indent string, n, depth int) string {
	rf.groups++
	name := fmt.Sprintf("%s%dF%d", []string{"Extra", "Pick", "Note"}[r.IntN(3)], rf.groups, rf.index)
	var b strings.Builder
	fmt.Fprintf(&b, "%s%sgroup %s = %d {\n", indent, label, name, n)
	m := 1
	for range 1 + r.IntN(3) {
		kind := randomScalarKinds[r.IntN(len(randomScalarKinds))]
		if kind == "ENUM" && rf.enum == "" {
			kind = "int32"
		}
		if r.IntN(3) == 0 {
			kind = "repeated " + kind
		}
		b.WriteString(indent + rf.field(r, kind, fmt.Sprintf("g%d", m), m, false))
		m++
	}
	if depth < 2 && r.IntN(3) == 0 {
		b.WriteString(rf.group(r, "optional ", indent+"  ", m, depth+1))
	}
	fmt.Fprintf(&b, "%s}\n", indent)
	return b.String()
}

// extend declares, in rf's extend blocks, extensions of message full (a
// proto2 message of rf, by package-relative name) numbered from n.
func (rf *randomFile) extend(r *rand.Rand, full string, n int) {
	b := &rf.extends
	fmt.Fprintf(b, "extend %s {\n", full)
	prefix := "ext_" + strings.ToLower(strings.ReplaceAll(full, ".", "_"))
	for i := range 1 + r.IntN(3) {
		switch r.IntN(4) {
		case 0:
			b.WriteString(rf.group(r, "optional ", "  ", n, 1))
		case 1:
			b.WriteString(rf.field(r, "MSG", fmt.Sprintf("%s_%d", prefix, i), n, false))
		default:
			kind := randomScalarKinds[r.IntN(len(randomScalarKinds))]
			if kind == "ENUM" && rf.enum == "" {
				kind = "int32"
			}
			if r.IntN(3) == 0 {
				kind = "repeated " + kind
			}
			b.WriteString(rf.field(r, kind, fmt.Sprintf("%s_%d", prefix, i), n, false))
		}
		n++
	}
	b.WriteString("}\n\n")
}

// generate writes the declarations of rf.
func (rf *randomFile) generate(r *rand.Rand, usedMsgs map[string]bool, files []*randomFile) {
	var b = &rf.body
	for _, f := range rf.visible(files)[1:] {
		rf.imported = append(rf.imported, f.msgs...)
	}
	if r.IntN(2) == 0 || rf.syntax == "proto2" {
		e := "Kind" + strings.ToUpper(string(rune('A'+r.IntN(26)))) + fmt.Sprint(r.IntN(1000))
		for usedMsgs[e] {
			e += "X"
		}
		usedMsgs[e] = true
		rf.enum = e
		prefix := strings.ToUpper(e)
		fmt.Fprintf(b, "enum %s {\n  %s_UNSPECIFIED = 0;\n  %s_ONE = 1;\n  %s_TWO = 2;\n}\n\n", e, prefix, prefix, prefix)
	}
	nMsgs := 1 + r.IntN(4)
	for range nMsgs {
		name := pick(r, randomMessageNames)
		for usedMsgs[name] {
			name += "X"
		}
		usedMsgs[name] = true
		rf.message(r, b, name, "", 0)
	}
	if r.IntN(3) != 0 {
		rf.service(r, b, files, usedMsgs)
	}
}

// message writes message name, nested in prefix (as "Outer."), at depth.
func (rf *randomFile) message(r *rand.Rand, b *strings.Builder, name, prefix string, depth int) {
	indent := strings.Repeat("  ", depth)
	fmt.Fprintf(b, "%smessage %s {\n", indent, name)
	rf.msgs = append(rf.msgs, "."+rf.pkg+"."+prefix+name)
	fields := slices.Clone(randomFieldNames[0])
	r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	if r.IntN(16) == 0 {
		fields[0] = randomFieldNames[1][r.IntN(len(randomFieldNames[1]))]
	}
	var keyable, all []string // Field names.
	declOf := map[string]string{}
	n := 1
	var decls []string
	uuid := ""
	if r.IntN(2) == 0 {
		uuid = "uuid"
		decls = append(decls, rf.field(r, "bytes", uuid, n, false))
		n++
	}
	for _, fname := range fields[:2+r.IntN(5)] {
		if rf.enum == "" && r.IntN(2) == 0 {
			continue
		}
		if r.IntN(4) == 0 {
			kind := randomValueKinds[r.IntN(len(randomValueKinds))]
			if rf.enum == "" {
				kind = strings.ReplaceAll(kind, "ENUM", "int32")
			}
			decls = append(decls, rf.field(r, kind, fname, n, false))
		} else {
			kind := randomKeyKinds[r.IntN(len(randomKeyKinds))]
			if kind == "ENUM" && rf.enum == "" {
				kind = "sint32"
			}
			decls = append(decls, rf.field(r, kind, fname, n, true))
			declOf[fname] = decls[len(decls)-1]
			keyable = append(keyable, fname)
		}
		all = append(all, fname)
		n++
	}
	var opts []string
	full := prefix + name
	if uuid != "" && r.IntN(4) != 0 {
		var parts []string
		parts = append(parts, `uuid_field: "uuid"`)
		if len(keyable) != 0 && r.IntN(2) == 0 {
			pk := keyable[:1+r.IntN(len(keyable))]
			parts = append(parts, `partition_key: ["`+strings.Join(pk, `", "`)+`"]`)
			for _, f := range pk {
				rf.partitionKeys[full] = append(rf.partitionKeys[full], fieldDecl{f, declOf[f]})
			}
		}
		if r.IntN(3) == 0 {
			parts = append(parts, "framing: FRAMING_JSON")
		}
		if r.IntN(8) == 0 {
			parts = append(parts, `message_type: "`+[]string{"shared", "clicks", rf.pkg + "." + full}[r.IntN(3)]+`"`)
		}
		opts = append(opts, indent+"  option (gazconsumer.v1.message).journal = {"+strings.Join(parts, ", ")+"};\n")
		rf.journals = append(rf.journals, full)
	}
	if len(keyable) != 0 && r.IntN(3) != 0 {
		var keys []string
		for _, k := range keyable[:1+r.IntN(len(keyable))] {
			rf.keys[full] = append(rf.keys[full], fieldDecl{k, declOf[k]})
			desc := ""
			if r.IntN(3) == 0 {
				desc = ", descending: true"
			}
			keys = append(keys, `{field: "`+k+`"`+desc+`}`)
		}
		tname := ""
		if r.IntN(8) == 0 {
			tname = `name: "` + []string{"rows", "t", full}[r.IntN(3)] + `", `
		}
		ttl := ""
		if v := ttlOf(rf.pkg + "." + full); v != "" {
			ttl = `, ttl: "` + v + `"`
		}
		opts = append(opts, indent+"  option (gazconsumer.v1.message).table = {"+tname+"key: ["+strings.Join(keys, ", ")+"]"+ttl+"};\n")
		rf.tables = append(rf.tables, full)
	}
	if rf.syntax == "proto2" {
		// Groups, which only proto2 declares.
		for range r.IntN(3) * r.IntN(2) {
			decls = append(decls, rf.group(r, []string{"optional ", "repeated "}[r.IntN(2)], "  ", n, 0))
			n++
		}
	}
	if len(all) > 1 && r.IntN(3) == 0 {
		// A oneof of value fields.
		var o strings.Builder
		o.WriteString("  oneof choice {\n")
		kinds := []string{"string", "int64", "bytes", "double", "MSG", "google.protobuf.Timestamp", "ENUM", "GROUP"}
		for i := range 2 + r.IntN(3) {
			kind := kinds[r.IntN(len(kinds))]
			switch {
			case kind == "GROUP" && rf.syntax == "proto2":
				o.WriteString(rf.group(r, "", "    ", n, 1))
				n++
				continue
			case kind == "GROUP":
				kind = "sint32"
			case kind == "ENUM" && rf.enum == "":
				kind = "fixed64"
			case kind == "ENUM":
				kind = rf.enum
			case kind == "MSG":
				kind = rf.msgRef(r)
			}
			fmt.Fprintf(&o, "    %s one_%c = %d;\n", kind, 'a'+i, n)
			n++
		}
		o.WriteString("  }\n")
		decls = append(decls, o.String())
	}
	if rf.syntax == "proto2" && r.IntN(4) == 0 {
		// Extensions, declared in the file.
		decls = append(decls, "  extensions 100 to 199;\n")
		rf.extend(r, full, 100)
	}
	for _, o := range opts {
		b.WriteString(o)
	}
	for _, d := range decls {
		for _, line := range strings.SplitAfter(d, "\n") {
			if line != "" {
				b.WriteString(indent + line)
			}
		}
	}
	if depth < 2 && r.IntN(4) == 0 {
		inner := pick(r, randomMessageNames) + "In"
		rf.message(r, b, inner, full+".", depth+1)
	}
	fmt.Fprintf(b, "%s}\n\n", indent)
}

// service writes a consumer service, of the journal messages and tables
// rf sees.
func (rf *randomFile) service(r *rand.Rand, b *strings.Builder, files []*randomFile, usedMsgs map[string]bool) {
	var journals, tables []ref
	for _, f := range rf.visible(files) {
		for _, j := range f.journals {
			journals = append(journals, ref{f.pkg, j})
		}
		for _, t := range f.tables {
			tables = append(tables, ref{f.pkg, t})
		}
	}
	if len(journals) == 0 {
		return
	}
	name := pick(r, randomServiceNames)
	for usedMsgs[name] {
		name += "S"
	}
	usedMsgs[name] = true
	qualify := func(x ref) string {
		if x.pkg == rf.pkg && r.IntN(2) == 0 {
			return x.name
		}
		return "." + x.pkg + "." + x.name
	}
	var opts []string
	var consumerTables []ref
	var ownedPK []fieldDecl // The partition key of a rescalable consumer.
	inputs := journals[:1+r.IntN(len(journals))]
	if pk := rf.partitionKeys[inputs[0].name]; inputs[0].pkg == rf.pkg && pk != nil && r.IntN(3) == 0 {
		ownedPK = pk
		// A rescalable consumer: of its first input alone (or, at times,
		// of others, whose partition keys may differ), and of a table
		// carrying that input's partition key (and, at times, of others,
		// which may lack it).
		if r.IntN(4) != 0 {
			inputs = inputs[:1]
		}
		consumerTables = append(consumerTables, ref{rf.pkg, rf.ownedTable(r, b, pk, usedMsgs)})
		if len(tables) != 0 && r.IntN(4) == 0 {
			consumerTables = append(consumerTables, tables[r.IntN(len(tables))])
		}
		opts = append(opts, "rescalable: true")
	}
	if len(tables) != 0 && consumerTables == nil && r.IntN(4) != 0 {
		consumerTables = tables[:1+r.IntN(len(tables))]
	}
	if consumerTables != nil {
		var ts []string
		for _, t := range consumerTables {
			ts = append(ts, `"`+qualify(t)+`"`)
		}
		opts = append(opts, "tables: ["+strings.Join(ts, ", ")+"]")
	}
	if r.IntN(2) == 0 {
		var ps []string
		for _, j := range journals[:1+r.IntN(len(journals))] {
			ps = append(ps, `{message: "`+qualify(j)+`"}`)
		}
		opts = append(opts, "publishes: ["+strings.Join(ps, ", ")+"]")
	}
	if r.IntN(4) == 0 {
		opts = append(opts, "shard_defaults: {max_txn_duration: {seconds: 2}, min_txn_duration: {nanos: 1500}, hot_standbys: 1}")
	}
	if p := failurePolicyOf(rf.pkg + "." + name); p != "" {
		opts = append(opts, "on_failure: "+p)
	}
	// A timer, at times (picked by a hash, as failure policies are): of a
	// rescalable consumer, keyed by its partition key's fields and a
	// sequence (owned), or at times by an id (whose timers have no owner,
	// rejected unless the partition key is that id).
	timer := ""
	h := fnv.New32a()
	h.Write([]byte("timer " + rf.pkg + "." + name))
	if sum := h.Sum32(); sum%3 == 0 {
		timer = name + "Tick"
		for usedMsgs[timer] {
			timer += "T"
		}
		usedMsgs[timer] = true
		if ownedPK != nil && sum%4 != 0 {
			fields := append(slices.Clone(ownedPK), fieldDecl{"fire_seq", rf.field(r, "int64", "fire_seq", 1, true)})
			var keys, decls []string
			for i, f := range fields {
				keys = append(keys, `{field: "`+f.name+`"}`)
				decls = append(decls, f.renumbered(i+1))
			}
			fmt.Fprintf(b, "message %s {\n  option (gazconsumer.v1.message).timer = {key: [%s]};\n%s}\n\n", timer, strings.Join(keys, ", "), strings.Join(decls, ""))
		} else {
			label := ""
			if rf.syntax == "proto2" {
				label = "optional "
			}
			fmt.Fprintf(b, "message %s {\n  option (gazconsumer.v1.message).timer = {key: [{field: \"id\"}, {field: \"at\", descending: true}]};\n  %sstring id = 1;\n  %sint64 at = 2;\n  %sbytes note = 3;\n}\n\n",
				timer, label, label, label)
		}
		opts = append(opts, `timers: ["`+timer+`"]`)
	}
	fmt.Fprintf(b, "service %s {\n  option (gazconsumer.v1.consumer) = {%s};\n", name, strings.Join(opts, ", "))
	usedRPCs := map[string]bool{}
	if timer != "" {
		usedRPCs["On"+timer] = true
		fmt.Fprintf(b, "  rpc On%s(%s) returns (google.protobuf.Empty);\n", timer, timer)
	}
	for _, j := range inputs {
		short := j.name[strings.LastIndex(j.name, ".")+1:]
		rpc := "On" + short
		if r.IntN(4) == 0 {
			rpc = "on_" + strings.ToLower(short)
		}
		for usedRPCs[rpc] {
			rpc += "2"
		}
		usedRPCs[rpc] = true
		if p := failurePolicyOf(rf.pkg + "." + name + "." + rpc); p != "" {
			fmt.Fprintf(b, "  rpc %s(%s) returns (google.protobuf.Empty) {\n    option (gazconsumer.v1.handler).on_failure = %s;\n  }\n", rpc, "."+j.pkg+"."+j.name, p)
		} else {
			fmt.Fprintf(b, "  rpc %s(%s) returns (google.protobuf.Empty);\n", rpc, "."+j.pkg+"."+j.name)
		}
	}
	b.WriteString("}\n\n")
	if len(consumerTables) != 0 && r.IntN(3) != 0 {
		rf.queries(r, b, name, consumerTables[r.IntN(len(consumerTables))], inputs, usedMsgs)
	}
}

// failurePolicies are on_failure annotations, valid and not; "" is none.
var failurePolicies = []string{
	"", "", "", "", "",
	"{retries: 3}",
	"{retries: 2, backoff: {nanos: 1000000}, max_backoff: {seconds: 1}, then: FAILURE_ACTION_DEAD_LETTER}",
	"{then: FAILURE_ACTION_DEAD_LETTER}",
	"{then: FAILURE_ACTION_FAIL}",
	"{retries: 1, backoff: {seconds: 2}, max_backoff: {seconds: 1}}", // Rejected: max_backoff < backoff.
	"{backoff: {seconds: 1}}",                                        // Rejected: a backoff without retries.
}

// ttls are ttl annotations of tables, valid and not; "" is none.
var ttls = []string{"", "", "", "", "", "", "", "", "", "", "720h", "1h30m", "90s", "720h", "1h", "0s" /* Rejected: not positive. */}

// ttlOf returns the ttl annotation of a table named name, or "", picked as
// failurePolicyOf picks.
func ttlOf(name string) string {
	h := fnv.New32a()
	h.Write([]byte("ttl " + name))
	return ttls[h.Sum32()%uint32(len(ttls))]
}

// failurePolicyOf returns the on_failure annotation of a consumer or rpc
// named name, or "": one of failurePolicies, picked by a hash of the name
// rather than by the sample's random numbers, whose sequence the samples
// without policies keep.
func failurePolicyOf(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return failurePolicies[h.Sum32()%uint32(len(failurePolicies))]
}

// ownedTable writes a table whose key carries the fields of partition key
// pk (of a journal message of rf), in another order, perhaps descending,
// among a field of its own, and returns its name.
func (rf *randomFile) ownedTable(r *rand.Rand, b *strings.Builder, pk []fieldDecl, usedMsgs map[string]bool) string {
	name := "Owned" + pick(r, randomMessageNames)
	for usedMsgs[name] {
		name += "X"
	}
	usedMsgs[name] = true
	fields := slices.Clone(pk)
	r.Shuffle(len(fields), func(i, j int) { fields[i], fields[j] = fields[j], fields[i] })
	if r.IntN(2) == 0 {
		i := r.IntN(len(fields) + 1)
		fields = slices.Insert(fields, i, fieldDecl{"seq_no", rf.field(r, "int64", "seq_no", 1, true)})
	}
	var keys, decls []string
	for i, f := range fields {
		desc := ""
		if r.IntN(3) == 0 {
			desc = ", descending: true"
		}
		keys = append(keys, `{field: "`+f.name+`"`+desc+`}`)
		decls = append(decls, f.renumbered(i+1))
	}
	fmt.Fprintf(b, "message %s {\n  option (gazconsumer.v1.message).table = {key: [%s]};\n%s}\n\n", name, strings.Join(keys, ", "), strings.Join(decls, ""))
	rf.msgs = append(rf.msgs, "."+rf.pkg+"."+name)
	rf.tables = append(rf.tables, name)
	rf.keys[name] = fields
	return name
}

// queries writes a queries service of consumer, reading its table t, of
// requests carrying (if the first input of consumer with a partition key
// is declared in rf) that partition key, or not.
func (rf *randomFile) queries(r *rand.Rand, b *strings.Builder, consumer string, t ref, inputs []ref, usedMsgs map[string]bool) {
	if t.pkg != rf.pkg || rf.keys[t.name] == nil {
		return // Of another package, or file: its fields may be of another syntax.
	}
	var route []fieldDecl
	for _, in := range inputs {
		if in.pkg == rf.pkg && rf.partitionKeys[in.name] != nil {
			route = rf.partitionKeys[in.name]
			break
		}
	}
	unique := func(name string) string {
		for usedMsgs[name] {
			name += "Q"
		}
		usedMsgs[name] = true
		return name
	}
	row := "." + t.pkg + "." + t.name
	short := t.name[strings.LastIndex(t.name, ".")+1:]
	keys := rf.keys[t.name]
	// request writes a request message of fields.
	request := func(name string, fields []fieldDecl, extra ...string) {
		fmt.Fprintf(b, "message %s {\n", name)
		seen := map[string]bool{}
		n := 1
		for _, f := range fields {
			if !seen[f.name] {
				seen[f.name] = true
				b.WriteString(f.renumbered(n))
				n++
			}
		}
		for _, e := range extra {
			if rf.syntax == "proto2" {
				e = "optional " + e
			}
			fmt.Fprintf(b, "  %s = %d;\n", e, n)
			n++
		}
		b.WriteString("}\n\n")
	}
	var routing []fieldDecl
	if r.IntN(3) != 0 {
		routing = route
	}
	svc := unique(consumer + "Queries")
	get := unique("Get" + short + "Request")
	request(get, append(slices.Clone(keys), routing...))
	scan := unique("Scan" + short + "Request")
	prefix := keys[:r.IntN(len(keys)+1)]
	tokenType := []string{"string", "bytes"}[r.IntN(2)]
	request(scan, append(slices.Clone(prefix), routing...), "int32 limit", tokenType+" page_token")
	scanResp := unique("Scan" + short + "Response")
	var label string
	if rf.syntax == "proto2" {
		label = "optional "
	}
	fmt.Fprintf(b, "message %s {\n  repeated %s rows = 1;\n  %s%s next_page_token = 2;\n}\n\n", scanResp, row, label, tokenType)
	fmt.Fprintf(b, "service %s {\n  option (gazconsumer.v1.queries) = {consumer: %q};\n", svc, consumer)
	fmt.Fprintf(b, "  rpc Get%s(%s) returns (%s) {\n    option (gazconsumer.v1.read) = {table: %q, kind: READ_KIND_GET};\n  }\n", short, get, row, row)
	fmt.Fprintf(b, "  rpc Scan%s(%s) returns (%s) {\n    option (gazconsumer.v1.read) = {table: %q, kind: READ_KIND_SCAN, max_limit: 20};\n  }\n", short, scan, scanResp, row)
	b.WriteString("}\n\n")
}

// render returns the text of rf.
func (rf *randomFile) render() string {
	var b strings.Builder
	if rf.syntax == "2023" {
		b.WriteString("edition = \"2023\";\n\n")
	} else {
		fmt.Fprintf(&b, "syntax = %q;\n\n", rf.syntax)
	}
	fmt.Fprintf(&b, "package %s;\n\n", rf.pkg)
	imports := append([]string{"gazconsumer/v1/options.proto", "google/protobuf/empty.proto", "google/protobuf/timestamp.proto"}, rf.imports...)
	if strings.Contains(rf.body.String()+rf.extends.String(), "google.protobuf.Duration") {
		imports = append(imports, "google/protobuf/duration.proto")
	}
	for _, imp := range imports {
		fmt.Fprintf(&b, "import %q;\n", imp)
	}
	fmt.Fprintf(&b, "\noption go_package = %q;\n\n", rf.goPackage)
	b.WriteString(rf.body.String())
	b.WriteString(rf.extends.String())
	return b.String()
}
