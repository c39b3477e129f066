package specgen

import (
	"context"
	"fmt"
	"os"

	"github.com/bufbuild/protocompile"
	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Compile compiles the .proto files named by files, paths relative to one of
// importPaths (directories searched in order), with their source positions.
// Imports are resolved from importPaths, then from the well-known types and
// gazconsumer/v1/options.proto built into this package. It returns the
// descriptors of files, in order, with their gazconsumer options decoded.
func Compile(ctx context.Context, importPaths, files []string) ([]protoreflect.FileDescriptor, error) {
	var builtin = protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
		if path == gcv1.File_gazconsumer_v1_options_proto.Path() {
			return protocompile.SearchResult{Desc: gcv1.File_gazconsumer_v1_options_proto}, nil
		}
		return protocompile.SearchResult{}, os.ErrNotExist
	})
	var c = protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.CompositeResolver{
			&protocompile.SourceResolver{ImportPaths: importPaths},
			builtin,
		}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	var compiled, err = c.Compile(ctx, files...)
	if err != nil {
		return nil, err // Already positioned at file.proto:line:col.
	}
	var set = new(descriptorpb.FileDescriptorSet)
	var seen = map[string]bool{}
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		var imports = fd.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(fd))
	}
	for _, f := range compiled {
		add(f)
	}
	// Round trip through the wire, so that the options are decoded by the
	// types linked into this package, as from a descriptor set.
	b, err := proto.Marshal(set)
	if err != nil {
		return nil, fmt.Errorf("encoding compiled descriptors: %w", err)
	}
	_, all, err := descriptors(b)
	if err != nil {
		return nil, err
	}
	var out []protoreflect.FileDescriptor
	for _, name := range files {
		fd, err := all.FindFileByPath(name)
		if err != nil {
			return nil, fmt.Errorf("compiled file %s: %w", name, err)
		}
		out = append(out, fd)
	}
	return out, nil
}

// ReadDescriptorSet decodes a FileDescriptorSet holding its files' imports
// (`buf build -o FILE.binpb`, or `protoc --include_imports
// --include_source_info --descriptor_set_out=FILE.binpb`). It returns the
// descriptors of all of its files, in order; errors are positioned in them
// only if the set includes source info.
func ReadDescriptorSet(data []byte) ([]protoreflect.FileDescriptor, error) {
	var set, all, err = descriptors(data)
	if err != nil {
		return nil, err
	}
	var out []protoreflect.FileDescriptor
	for _, f := range set.File {
		fd, err := all.FindFileByPath(f.GetName())
		if err != nil {
			return nil, fmt.Errorf("descriptor set file %s: %w", f.GetName(), err)
		}
		out = append(out, fd)
	}
	return out, nil
}

// descriptors decodes an encoded FileDescriptorSet, its options by the types
// linked into this package, and links its files.
func descriptors(data []byte) (*descriptorpb.FileDescriptorSet, *protoregistry.Files, error) {
	var set = new(descriptorpb.FileDescriptorSet)
	if err := (proto.UnmarshalOptions{Resolver: protoregistry.GlobalTypes}).Unmarshal(data, set); err != nil {
		return nil, nil, fmt.Errorf("decoding descriptor set: %w", err)
	}
	var files, err = protodesc.NewFiles(set)
	if err != nil {
		return nil, nil, fmt.Errorf("linking descriptor set: %w", err)
	}
	return set, files, nil
}
