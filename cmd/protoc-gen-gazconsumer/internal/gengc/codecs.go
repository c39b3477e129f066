package gengc

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"slices"
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
// generated, as vtprotobuf's generator writes them. Files of editions, and
// files with a message of the opaque API, have none: vtprotobuf's
// generator, which sets and reads the fields of messages' structs, supports
// the syntaxes proto2 and proto3 of the open and hybrid APIs only. Their
// messages are encoded by reflection.
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
		src, err := retitle([]byte(rf.GetContent()))
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

// codecsSupported reports whether vtprotobuf's generator supports the
// messages of f.
func codecsSupported(f *protogen.File) bool {
	if s := f.Desc.Syntax(); s != protoreflect.Proto2 && s != protoreflect.Proto3 {
		return false
	}
	var supported func([]*protogen.Message) bool
	supported = func(ms []*protogen.Message) bool {
		for _, m := range ms {
			if m.APILevel == gofeaturespb.GoFeatures_API_OPAQUE || !supported(m.Messages) {
				return false
			}
			for _, fd := range m.Fields {
				if slices.Contains(codecMethods, fd.GoName) {
					return false // The field would clash with a method.
				}
			}
			for _, o := range m.Oneofs {
				if slices.Contains(codecMethods, o.GoName) {
					return false
				}
			}
		}
		return true
	}
	return supported(f.Messages)
}

// codecMethods are the methods vtprotobuf's generator declares on messages
// (and on the types of their oneofs' fields), with the features of
// codecFeatures.
var codecMethods = []string{"MarshalVT", "MarshalToVT", "MarshalToSizedBufferVT", "SizeVT", "UnmarshalVT"}

// vtHeader is how vtprotobuf's generator begins a file, and vtVersion the
// line after it, which names the version of the main module of the binary
// (this plugin's).
var (
	vtHeader  = []byte("// Code generated by protoc-gen-go-vtproto. DO NOT EDIT.\n")
	vtVersion = []byte("// protoc-gen-go-vtproto version: ")
)

// retitle heads src, a file of vtprotobuf's generator, as generated by this
// plugin, and names the generator's module and version in place of this
// plugin's version (which would change with every build).
func retitle(src []byte) ([]byte, error) {
	var rest, ok = bytes.CutPrefix(src, vtHeader)
	if !ok {
		return nil, fmt.Errorf("vtprotobuf's generator wrote an unexpected header: %.80q", src)
	}
	if after, ok := bytes.CutPrefix(rest, vtVersion); ok {
		if i := bytes.IndexByte(after, '\n'); i >= 0 {
			rest = after[i+1:]
		}
	}
	var b bytes.Buffer
	b.WriteString("// Code generated by protoc-gen-gazconsumer. DO NOT EDIT.\n")
	b.WriteString("// Codecs by the generator of " + vtModule + vtModuleVersion() + ".\n")
	b.Write(rest)
	return b.Bytes(), nil
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
