package gengc

import (
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	pathpkg "path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	// The codecs' features of vtprotobuf's generator, registered by import.
	_ "github.com/planetscale/vtprotobuf/features/marshal"
	_ "github.com/planetscale/vtprotobuf/features/size"
	_ "github.com/planetscale/vtprotobuf/features/unmarshal"
	vtgen "github.com/planetscale/vtprotobuf/generator"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/gofeaturespb"
)

// Values of Options.Codecs.
const (
	// CodecsVTProto generates the codecs of vtprotobuf's generator.
	CodecsVTProto = "vtproto"
	// CodecsNone generates no codecs: messages are encoded by
	// google.golang.org/protobuf's reflection, unless another plugin (such
	// as protoc-gen-go-vtproto itself) generates codecs.
	CodecsNone = "none"
)

// CodecsSuffix ends the name of the file of a .proto file's codecs, as
// protoc-gen-go-vtproto names it: running both plugins into one directory
// fails on that file, written twice, rather than on the methods declared
// twice.
const CodecsSuffix = "_vtproto.pb.go"

// codecFeatures are the features of vtprotobuf's generator which package
// runtime/codec uses.
var codecFeatures = []string{"marshal", "unmarshal", "size"}

// genCodecs returns the files of fast codecs (MarshalToSizedBufferVT,
// SizeVT, UnmarshalVT, which package runtime/codec uses in place of
// protobuf's reflection) of the messages of each file of the request to be
// generated, as vtprotobuf's generator writes them. Files the generator
// doesn't encode faithfully have none (see codecsSupported), nor files
// whose codecs would call those of a message without: their messages are
// encoded by reflection.
func genCodecs(gen *protogen.Plugin) ([]output, error) {
	// A plugin of its own, over the same request: the generator declares
	// the features it supports on the plugin it's given, and writes files
	// named and headed as its own, which are renamed here.
	sub, err := protogen.Options{ParamFunc: func(string, string) error { return nil }}.New(gen.Request)
	if err != nil {
		return nil, fmt.Errorf("generating codecs: %w", err)
	}
	for _, f := range sub.Files {
		if f.Generate && !codecsSupported(f) {
			f.Generate = false
		}
	}
	dropCallers(sub)
	g, err := vtgen.NewGenerator(sub, codecFeatures, &vtgen.Config{
		Poolable:        vtgen.NewObjectSet(),
		PoolableExclude: vtgen.NewObjectSet(),
	})
	if err != nil {
		return nil, fmt.Errorf("generating codecs: %w", err)
	}
	g.Generate()
	var resp = sub.Response()
	if resp.Error != nil {
		return nil, fmt.Errorf("generating codecs: %s", resp.GetError())
	}
	// The response names files without the prefix of the option module,
	// which gen's response removes from those handed to it.
	var named = map[string]*protogen.File{}
	for _, f := range sub.Files {
		named[f.GeneratedFilenamePrefix+CodecsSuffix] = f
	}
	var module = moduleOption(gen.Request.GetParameter())
	var out []output
	for _, rf := range resp.File {
		var name = rf.GetName()
		if module != "" {
			name = module + "/" + name
		}
		var f = named[name]
		if f == nil {
			return nil, fmt.Errorf("generating codecs: vtprotobuf's generator wrote %s, of no file of the request", rf.GetName())
		}
		src, err := retitle([]byte(rf.GetContent()), f)
		if err == nil {
			src, err = faithful(src, f)
		}
		if err != nil {
			return nil, fmt.Errorf("generating codecs of %s: %w", f.Desc.Path(), err)
		}
		out = append(out, output{name: name, path: f.GoImportPath, src: src})
	}
	slices.SortFunc(out, func(a, b output) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// moduleOption returns the value of the option module of the plugin's
// parameter, as protogen reads it, or "".
func moduleOption(param string) string {
	var module string
	for _, p := range strings.Split(param, ",") {
		if v, ok := strings.CutPrefix(p, "module="); ok {
			module = v
		}
	}
	return module
}

// codecsSupported reports whether vtprotobuf's generator writes codecs of
// the messages of f that compile and encode them as protobuf does. It
// doesn't for files of editions, nor for messages of the opaque API (the
// generator sets and reads the fields of messages' structs, of the syntaxes
// proto2 and proto3 of the open and hybrid APIs only), nor for a field
// named like one of its methods. Nor for these, whose codecs it writes
// wrong: groups (which don't compile if repeated or in a oneof, and
// otherwise don't decode: they fail with io.ErrUnexpectedEOF), messages
// with extension ranges (whose extensions the codecs drop, and whose
// decoding of one resets the message), and weak fields.
func codecsSupported(f *protogen.File) bool {
	if s := f.Desc.Syntax(); s != protoreflect.Proto2 && s != protoreflect.Proto3 {
		return false
	}
	supported := true
	walkMessages(f.Messages, func(m *protogen.Message) {
		if m.APILevel == gofeaturespb.GoFeatures_API_OPAQUE || m.Desc.ExtensionRanges().Len() != 0 {
			supported = false
		}
		for _, fd := range m.Fields {
			if slices.Contains(codecMethods, fd.GoName) {
				supported = false // The field would clash with a method.
			} else if fd.Desc.Kind() == protoreflect.GroupKind || fd.Desc.IsWeak() {
				supported = false
			}
		}
		for _, o := range m.Oneofs {
			if slices.Contains(codecMethods, o.GoName) {
				supported = false
			}
		}
	})
	return supported
}

// dropCallers drops from the files of gen to generate, until none is left,
// those with a field of a message whose codecs vtprotobuf's generator would
// call but which has none. The generator calls the methods of a message of
// a proto package of the files it generates (but for the well-known types,
// whose codecs are its own) directly; of another, through an interface,
// falling back on reflection. A message of a file not generated by this
// request is taken to have codecs if the file would.
func dropCallers(gen *protogen.Plugin) {
	withCodecs := func(m *protogen.Message) bool {
		f := gen.FilesByPath[m.Desc.ParentFile().Path()]
		if f == nil || slices.Contains(gen.Request.GetFileToGenerate(), f.Desc.Path()) {
			return f != nil && f.Generate
		}
		return codecsSupported(f)
	}
	for dropped := true; dropped; {
		dropped = false
		local := map[protoreflect.FullName]bool{}
		for _, f := range gen.Files {
			if f.Generate {
				local[f.Desc.Package()] = true
			}
		}
		calls := func(f *protogen.File) bool {
			var calls bool
			walkMessages(f.Messages, func(m *protogen.Message) {
				for _, fd := range m.Fields {
					if to := fd.Message; to != nil && local[to.Desc.ParentFile().Package()] && !vtWellKnown(to.Desc.FullName()) && !withCodecs(to) {
						calls = true
					}
				}
			})
			return calls
		}
		for _, f := range gen.Files {
			if f.Generate && calls(f) {
				f.Generate, dropped = false, true
			}
		}
	}
}

// vtWellKnown reports whether vtprotobuf's generator encodes messages of
// type name with codecs of its own, those of the well-known types.
func vtWellKnown(name protoreflect.FullName) bool {
	switch name {
	case "google.protobuf.Any", "google.protobuf.Duration", "google.protobuf.Empty", "google.protobuf.FieldMask",
		"google.protobuf.Timestamp", "google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
		"google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value", "google.protobuf.BoolValue",
		"google.protobuf.StringValue", "google.protobuf.BytesValue", "google.protobuf.Struct", "google.protobuf.Value",
		"google.protobuf.ListValue":
		return true
	}
	return false
}

// codecMethods are the methods vtprotobuf's generator declares on messages
// (and on the types of their oneofs' fields), with the features of
// codecFeatures.
var codecMethods = []string{"MarshalVT", "MarshalToVT", "MarshalToSizedBufferVT", "SizeVT", "UnmarshalVT"}

// retitle heads src, a file of vtprotobuf's generator of the codecs of f,
// as generated by this plugin: whatever comments the generator writes
// before the package clause (its own name, and the version of the main
// module of the binary, this plugin's, which would change with every build)
// give way to Header, the generator's module and version, and the source.
func retitle(src []byte, f *protogen.File) ([]byte, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "", src, parser.PackageClauseOnly)
	if err != nil {
		return nil, err
	}
	header := "// " + Header + "\n" +
		"// Codecs by the generator of " + vtModule + vtModuleVersion() + ".\n" +
		"// source: " + f.Desc.Path() + "\n\n"
	return slices.Concat([]byte(header), src[fset.Position(file.Package).Offset:]), nil
}

// vtModule is the module of vtprotobuf's generator.
const vtModule = "github.com/planetscale/vtprotobuf"

// vtModuleVersion returns " VERSION", the version of vtModule built into
// the plugin, or "" if the binary doesn't tell.
func vtModuleVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == vtModule {
				return " " + d.Version
			}
		}
	}
	return ""
}

// faithful returns src, the codecs of f written by vtprotobuf's generator,
// corrected where they would not encode or decode as protobuf does:
//
//   - Floating-point fields without presence (proto3's) are encoded unless
//     +0.0, as protobuf does: the generator skips values that compare
//     equal to 0, -0.0 among them, which then decodes as +0.0. Its
//     conditions `m.F != 0`, in the methods SizeVT and
//     MarshalToSizedBufferVT of each message, become
//     `math.Float64bits(m.F) != 0` (or Float32bits).
//   - A message field of a type without codecs of the generator (of
//     another package) is decoded by protobuf's Unmarshal, which resets the
//     field's message: a field encoded twice (as in two encodings
//     concatenated) then holds the last one only, where protobuf merges
//     them. Those calls become `(proto.UnmarshalOptions{Merge: true}).Unmarshal`.
func faithful(src []byte, f *protogen.File) ([]byte, error) {
	fset := token.NewFileSet()
	file, err := parser.ParseFile(fset, "", src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	imported := map[string]string{} // Names of imported packages, by path.
	for _, imp := range file.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		imported[p] = pathpkg.Base(p)
		if imp.Name != nil {
			imported[p] = imp.Name.Name
		}
	}
	type edit struct {
		start, end int
		text       string
	}
	var edits []edit
	replace := func(n ast.Node, text string) {
		edits = append(edits, edit{fset.Position(n.Pos()).Offset, fset.Position(n.End()).Offset, text})
	}

	// The floating-point fields without presence, and their tests.
	bits := map[string]map[string]string{} // By message, by field, the function of math.
	walkMessages(f.Messages, func(m *protogen.Message) {
		if m.Desc.IsMapEntry() {
			return // Encoded whole, by the message of the map.
		}
		for _, fd := range m.Fields {
			if fd.Desc.IsList() || fd.Desc.HasPresence() {
				continue
			}
			var fn string
			switch fd.Desc.Kind() {
			case protoreflect.DoubleKind:
				fn = "Float64bits"
			case protoreflect.FloatKind:
				fn = "Float32bits"
			default:
				continue
			}
			if bits[m.GoIdent.GoName] == nil {
				bits[m.GoIdent.GoName] = map[string]string{}
			}
			bits[m.GoIdent.GoName][fd.GoName] = fn
		}
	})
	want := 0
	for _, fields := range bits {
		want += 2 * len(fields) // Their size, and their encoding.
	}
	tests := 0
	for _, decl := range file.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Recv == nil || len(fn.Recv.List) != 1 || len(fn.Recv.List[0].Names) != 1 {
			continue
		}
		var recv string
		if star, ok := fn.Recv.List[0].Type.(*ast.StarExpr); ok {
			if id, ok := star.X.(*ast.Ident); ok {
				recv = id.Name
			}
		}
		m := fn.Recv.List[0].Names[0].Name
		encodes := fn.Name.Name == "SizeVT" || fn.Name.Name == "MarshalToSizedBufferVT"
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.IfStmt:
				cond, ok := n.Cond.(*ast.BinaryExpr)
				if !ok || !encodes || cond.Op != token.NEQ {
					return true
				}
				sel, ok := cond.X.(*ast.SelectorExpr)
				zero, isLit := cond.Y.(*ast.BasicLit)
				if !ok || !isLit || zero.Value != "0" {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != m {
					return true
				}
				if fn := bits[recv][sel.Sel.Name]; fn != "" && imported["math"] != "" {
					replace(sel, imported["math"]+"."+fn+"("+m+"."+sel.Sel.Name+")")
					tests++
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Unmarshal" {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == imported[protoPkg] {
					replace(sel, "("+x.Name+".UnmarshalOptions{Merge: true}).Unmarshal") // In an if's header.
				}
			}
			return true
		})
	}
	if tests != want {
		return nil, fmt.Errorf("vtprotobuf's generator tested %d floating-point fields without presence against 0 (importing math as %q), not the %d expected: see faithful", tests, imported["math"], want)
	}
	slices.SortFunc(edits, func(a, b edit) int { return b.start - a.start })
	out := slices.Clone(src)
	for _, e := range edits {
		out = slices.Concat(out[:e.start], []byte(e.text), out[e.end:])
	}
	return format.Source(out)
}

// protoPkg is the import path of protobuf's package proto.
const protoPkg = "google.golang.org/protobuf/proto"
