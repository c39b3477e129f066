package gengc

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/reflect/protoreflect"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// position is a position in a .proto file, as errors give it.
type position struct {
	file      string
	line, col int // 1-based.
}

// String returns "file:line:col".
func (p position) String() string { return fmt.Sprintf("%s:%d:%d", p.file, p.line, p.col) }

// errorAt returns an error positioned at p.
func errorAt(p position, format string, args ...any) error {
	return fmt.Errorf("%s: %s", p, fmt.Sprintf(format, args...))
}

// posOf returns the position of the declaration of d.
func posOf(d protoreflect.Descriptor) position {
	loc := d.ParentFile().SourceLocations().ByDescriptor(d)
	return position{d.ParentFile().Path(), loc.StartLine + 1, loc.StartColumn + 1}
}

// errorf returns an error positioned at the declaration of d.
func errorf(d protoreflect.Descriptor, format string, args ...any) error {
	return errorAt(posOf(d), format, args...)
}

// Field numbers of the options of descriptors, in descriptor.proto.
const (
	messageOptionsField = 7 // DescriptorProto.options
	serviceOptionsField = 3 // ServiceDescriptorProto.options
	methodOptionsField  = 4 // MethodDescriptorProto.options
)

// Paths within the options of gazconsumer.v1, by field number.
const (
	optJournal      = 1 // MessageOptions.journal
	optTable        = 2 // MessageOptions.table
	optUUIDField    = 1 // JournalMessage.uuid_field
	optFraming      = 2 // JournalMessage.framing
	optMessageType  = 3 // JournalMessage.message_type
	optPartitionKey = 4 // JournalMessage.partition_key
	optTableName    = 1 // Table.name
	optKey          = 2 // Table.key
	optKeyField     = 1 // KeyField.field
	optStore        = 1 // Consumer.store
	optTables       = 2 // Consumer.tables
	optPublishes    = 3 // Consumer.publishes
	optShardDefs    = 4 // Consumer.shard_defaults
	optPublishMsg   = 1 // Publish.message
	optPublishParts = 2 // Publish.partitions
)

// optPos returns the position of the gazconsumer option of d, a message or
// a service, at path within the option (field numbers, each followed by an
// index if the field is repeated): that of the statement setting the deepest
// field of path that the source records (an option given as a message
// literal is recorded as a whole, one given field by field by each field),
// or else that of d.
func optPos(d protoreflect.Descriptor, path ...int32) position {
	switch d.(type) {
	case protoreflect.MessageDescriptor:
		return extPos(d, messageOptionsField, int32(gcv1.E_Message.Field), path...)
	case protoreflect.ServiceDescriptor:
		return extPos(d, serviceOptionsField, int32(gcv1.E_Consumer.Field), path...)
	}
	return posOf(d)
}

// extPos is optPos of the option of d that is extension ext of the
// options of d, field optsField of d's descriptor.
func extPos(d protoreflect.Descriptor, optsField, ext int32, path ...int32) position {
	locs := d.ParentFile().SourceLocations()
	want := append(protoreflect.SourcePath(nil), locs.ByDescriptor(d).Path...)
	want = append(want, optsField, ext)
	base := len(want)
	want = append(want, path...)
	var best []protoreflect.SourceLocation
	bestLen := -1
	for i := 0; i < locs.Len(); i++ {
		loc := locs.Get(i)
		n := len(loc.Path)
		if n < base || n > len(want) || !slices.Equal(loc.Path, want[:n]) || n < bestLen {
			continue
		}
		if n > bestLen {
			best, bestLen = nil, n
		}
		best = append(best, loc)
	}
	if len(best) == 0 {
		return posOf(d)
	}
	loc := best[0]
	// Statements setting a repeated field element by element are recorded
	// under the field's path, without an index: the index-th is the one.
	if bestLen < len(want) && bestLen > base && len(best) > 1 {
		if i := int(want[bestLen]); i < len(best) {
			loc = best[i]
		}
	}
	return position{d.ParentFile().Path(), loc.StartLine + 1, loc.StartColumn + 1}
}

// optErrorf returns an error positioned by optPos.
func optErrorf(d protoreflect.Descriptor, path []int32, format string, args ...any) error {
	return errorAt(optPos(d, path...), format, args...)
}

// at returns path: a readable way of passing option paths.
func at(path ...int32) []int32 { return path }
