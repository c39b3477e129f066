package protoload

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// MessageOptions returns the (gazconsumer.v1.message) option of m, or nil
// if m has none, as the type linked into the program, however m was loaded.
func MessageOptions(m protoreflect.MessageDescriptor) *gcv1.MessageOptions {
	opts, _ := extension(m.Options(), &descriptorpb.MessageOptions{}, gcv1.E_Message).(*gcv1.MessageOptions)
	return opts
}

// ConsumerOptions returns the (gazconsumer.v1.consumer) option of s, or
// nil if s has none, as the type linked into the program, however s was
// loaded.
func ConsumerOptions(s protoreflect.ServiceDescriptor) *gcv1.Consumer {
	opts, _ := extension(s.Options(), &descriptorpb.ServiceOptions{}, gcv1.E_Consumer).(*gcv1.Consumer)
	return opts
}

// extension returns extension xt of opts, or nil if it is not set. opts
// are decoded again into into, through the wire, so that the extension is
// read as the type linked into this package whether opts came from protoc
// (through protogen), from a compiler (which may hold it as a dynamic
// message or unknown fields) or from a descriptor set.
func extension(opts, into proto.Message, xt protoreflect.ExtensionType) any {
	if opts == nil || !opts.ProtoReflect().IsValid() {
		return nil
	}
	b, err := proto.MarshalOptions{AllowPartial: true}.Marshal(opts)
	if err != nil {
		return nil
	}
	if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(b, into); err != nil || !proto.HasExtension(into, xt) {
		return nil
	}
	return proto.GetExtension(into, xt)
}
