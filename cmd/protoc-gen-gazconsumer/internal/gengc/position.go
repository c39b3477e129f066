package gengc

import (
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/internal/protopos"
)

// position is a position in a .proto file, as errors give it.
type position = protopos.Position

// errorAt returns an error positioned at p.
func errorAt(p position, format string, args ...any) error {
	return protopos.Errorf(p, format, args...)
}

// posOf returns the position of the declaration of d.
func posOf(d protoreflect.Descriptor) position { return protopos.Of(d) }

// errorf returns an error positioned at the declaration of d.
func errorf(d protoreflect.Descriptor, format string, args ...any) error {
	return errorAt(posOf(d), format, args...)
}

// Field numbers of the options of descriptors, in descriptor.proto.
const (
	serviceOptionsField = protopos.ServiceOptionsField
	methodOptionsField  = protopos.MethodOptionsField
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
	optTTL          = 3 // Table.ttl
	optStore        = 1 // Consumer.store
	optTables       = 2 // Consumer.tables
	optPublishes    = 3 // Consumer.publishes
	optShardDefs    = 4 // Consumer.shard_defaults
	optPublishMsg   = 1 // Publish.message
	optPublishParts = 2 // Publish.partitions
)

// optPos returns the position of the gazconsumer option of d, a message or
// a service, at path within the option: see protopos.Option.
func optPos(d protoreflect.Descriptor, path ...int32) position { return protopos.Option(d, path...) }

// extPos is protopos.Ext.
func extPos(d protoreflect.Descriptor, optsField, ext int32, path ...int32) position {
	return protopos.Ext(d, optsField, ext, path...)
}

// optErrorf returns an error positioned by optPos.
func optErrorf(d protoreflect.Descriptor, path []int32, format string, args ...any) error {
	return errorAt(optPos(d, path...), format, args...)
}

// at returns path: a readable way of passing option paths.
func at(path ...int32) []int32 { return path }
