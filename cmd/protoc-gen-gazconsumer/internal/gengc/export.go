package gengc

// Names reserved in generated types, for tests to check against the types
// they embed.
var (
	// TxnReserved are the names a generated …Txn has of the runtime.Txn
	// it embeds.
	TxnReserved = txnReserved
	// HarnessReserved are the names a generated Harness has of the
	// *consumertest.Harness it embeds, and its own.
	HarnessReserved = harnessReserved
	// ProducerReserved are the names a generated Producer has of the
	// *consumertest.Producer it embeds.
	ProducerReserved = producerReserved
)
