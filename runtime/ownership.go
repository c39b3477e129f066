package runtime

// TableOwnership tells, for one table of a consumer (or one type of its
// timers, whose schema is a table's), the partition key of each of its
// rows: the key its row would be published under, were it a
// journal message of the consumer's sources. A consumer's state is split
// between the shards of a rescaled consumer by it (see Split): a row belongs
// to the shard of the partition its partition key maps to.
//
// Generated consumers list one for each table (table.Schema.Owned, or
// table.Schema.Unowned for a table whose key lacks the partition key's
// fields).
type TableOwnership struct {
	// Name of the table.
	Name string
	// Start and End bound the store keys of the table's rows: [Start, End).
	Start, End []byte
	// PartitionKey appends to b the order-preserving encoding of the
	// partition key of the row stored under key, as the consumer's journal
	// messages' AppendPartitionKey encode theirs. Nil if the table's key
	// lacks the fields of the partition key: the consumer can't be
	// rescaled.
	PartitionKey func(b, key []byte) ([]byte, error)
	// Unowned says, when PartitionKey is nil, why the table's rows have no
	// partition key (it names the table's declaration in its .proto file).
	Unowned string
}
