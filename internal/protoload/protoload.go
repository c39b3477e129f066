// Package protoload loads .proto schemas for gazconsumer's tools and tests:
// it compiles .proto files found under import roots (or held in memory),
// with source info and the standard imports built in, and optionally
// gazconsumer/v1/options.proto; it collects compiled files with their
// imports into a FileDescriptorSet, as buf build and protoc
// --include_imports write one; it reads such a set back; it finds the
// import roots of the files and directories a command is given; and it
// reads the gazconsumer options of the descriptors it loads as the types
// linked into the program.
package protoload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"gopkg.in/yaml.v2"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// Compile compiles files, by import path, finding them and their imports
// with r, and then among the standard imports (descriptor.proto, the
// well-known types), with their source positions. Errors and warnings go to
// rep, if not nil (see protocompile.Compiler.Reporter); otherwise Compile
// fails with the first error, positioned at file.proto:line:col (the file
// named by its import path). It returns
// the descriptors of files, in order.
func Compile(ctx context.Context, r protocompile.Resolver, rep reporter.Reporter, files ...string) ([]protoreflect.FileDescriptor, error) {
	var c = protocompile.Compiler{
		Resolver:       protocompile.WithStandardImports(r),
		SourceInfoMode: protocompile.SourceInfoStandard,
		Reporter:       rep,
	}
	var compiled, err = c.Compile(ctx, files...)
	if err != nil {
		return nil, err
	}
	var out = make([]protoreflect.FileDescriptor, len(compiled))
	for i, f := range compiled {
		out[i] = f
	}
	return out, nil
}

// Roots resolves import paths to the files under roots, directories
// searched in order.
func Roots(roots ...string) protocompile.Resolver {
	return &protocompile.SourceResolver{ImportPaths: roots}
}

// InMemory resolves import paths to the files of files (contents by import
// path), and then to those under roots, searched in order.
func InMemory(files map[string]string, roots ...string) protocompile.Resolver {
	return protocompile.CompositeResolver{
		&protocompile.SourceResolver{Accessor: protocompile.SourceAccessorFromMap(files)},
		Roots(roots...),
	}
}

// OptionsProto resolves gazconsumer/v1/options.proto, alone, to the
// descriptor linked into the program.
var OptionsProto protocompile.Resolver = protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
	if path == gcv1.File_gazconsumer_v1_options_proto.Path() {
		return protocompile.SearchResult{Desc: gcv1.File_gazconsumer_v1_options_proto}, nil
	}
	return protocompile.SearchResult{}, os.ErrNotExist
})

// WithOptionsProto resolves import paths with r, and then
// gazconsumer/v1/options.proto with OptionsProto. A path neither finds
// fails with r's error.
func WithOptionsProto(r protocompile.Resolver) protocompile.Resolver {
	return protocompile.CompositeResolver{r, OptionsProto}
}

// Collect returns a FileDescriptorSet of files and of all they import, in
// the order of WithImports: a set as buf build and protoc --include_imports
// write.
func Collect(files ...protoreflect.FileDescriptor) *descriptorpb.FileDescriptorSet {
	var set = new(descriptorpb.FileDescriptorSet)
	for _, fd := range WithImports(files...) {
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	return set
}

// WithImports returns files and all they import, each file once and after
// the files it imports, in the order of files and of their imports.
func WithImports(files ...protoreflect.FileDescriptor) []protoreflect.FileDescriptor {
	var out []protoreflect.FileDescriptor
	var seen = map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if fd == nil || seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		var imports = fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		out = append(out, fd)
	}
	for _, fd := range files {
		add(fd)
	}
	return out
}

// Imports returns the files fd imports, in order.
func Imports(fd protoreflect.FileDescriptor) []protoreflect.FileDescriptor {
	var imports = fd.Imports()
	var out = make([]protoreflect.FileDescriptor, imports.Len())
	for i := range out {
		out[i] = imports.Get(i).FileDescriptor
	}
	return out
}

// DecodeSet decodes an encoded FileDescriptorSet, the options of its files
// by the types linked into the program (as gazconsumer's annotations are),
// as they would be in generated code.
func DecodeSet(data []byte) (*descriptorpb.FileDescriptorSet, error) {
	var set = new(descriptorpb.FileDescriptorSet)
	if err := (proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes}).Unmarshal(data, set); err != nil {
		return nil, err
	}
	return set, nil
}

// LinkSet links the files of set. If linked, the imports set lacks are
// first added to it from the files linked into the program
// (gazconsumer/v1/options.proto, the well-known types), if they are there.
func LinkSet(set *descriptorpb.FileDescriptorSet, linked bool) (*protoregistry.Files, error) {
	if linked {
		set = &descriptorpb.FileDescriptorSet{File: set.File}
		var have = map[string]bool{}
		for _, f := range set.File {
			have[f.GetName()] = true
		}
		for i := 0; i < len(set.File); i++ {
			for _, dep := range set.File[i].GetDependency() {
				if have[dep] {
					continue
				}
				if fd, err := protoregistry.GlobalFiles.FindFileByPath(dep); err == nil {
					set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
					have[dep] = true
				}
			}
		}
	}
	return protodesc.NewFiles(set)
}

// ImportRoots returns the import roots of inputs, .proto files and
// directories of them: given, if any; else the modules of the buf.yaml at
// bufYAML (see BufModules), if bufYAML is not empty and the file exists;
// else the directories of inputs, in order, and for each file of inputs
// (or input that does not exist) fileRoot, once, after them, or the file's
// own directory in its place if fileRoot is empty.
func ImportRoots(given []string, bufYAML string, inputs []string, fileRoot string) ([]string, error) {
	if len(given) != 0 {
		return given, nil
	}
	if bufYAML != "" {
		var roots, err = BufModules(bufYAML)
		if err != nil || len(roots) != 0 {
			return roots, err
		}
	}
	var roots []string
	var files bool
	for _, in := range inputs {
		if info, err := os.Stat(in); err == nil && info.IsDir() {
			roots = append(roots, in)
		} else if fileRoot == "" {
			roots = append(roots, filepath.Dir(in))
		} else {
			files = true
		}
	}
	if files {
		roots = append(roots, fileRoot)
	}
	return roots, nil
}

// BufModules returns the module directories of buf configuration file
// path, a buf.yaml of version v2 (v1 modules are their buf.yaml's
// directory), or nil if there is no such file.
func BufModules(path string) ([]string, error) {
	var b, err = os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var cfg struct {
		Version string `yaml:"version"`
		Modules []struct {
			Path string `yaml:"path"`
		} `yaml:"modules"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var roots []string
	for _, m := range cfg.Modules {
		if cfg.Version == "v2" && m.Path != "" {
			roots = append(roots, filepath.Join(filepath.Dir(path), m.Path))
		}
	}
	if len(roots) == 0 {
		roots = []string{filepath.Dir(path)}
	}
	return roots, nil
}

// ImportPath returns the path by which file p, under one of roots (the
// first, in order), is imported, and false if p is under none of them.
func ImportPath(roots []string, p string) (string, bool) {
	for _, r := range roots {
		if rel, err := filepath.Rel(r, p); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return filepath.ToSlash(rel), true
		}
	}
	return "", false
}
