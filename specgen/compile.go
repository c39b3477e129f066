package specgen

import (
	"context"
	"fmt"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
	"google.golang.org/protobuf/proto"
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
	var compiled, err = protoload.Compile(ctx, protoload.WithOptionsProto(protoload.Roots(importPaths...)), nil, files...)
	if err != nil {
		return nil, err // Already positioned at file.proto:line:col.
	}
	var set = protoload.Collect(compiled...)
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
	var set, err = protoload.DecodeSet(data)
	if err != nil {
		return nil, nil, fmt.Errorf("decoding descriptor set: %w", err)
	}
	files, err := protoload.LinkSet(set, false)
	if err != nil {
		return nil, nil, fmt.Errorf("linking descriptor set: %w", err)
	}
	return set, files, nil
}
