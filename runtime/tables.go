package runtime

import (
	"context"

	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
)

// KV is the ordered key/value view of a Store within its current
// transaction, on which generated table accessors are built. Keys are
// compared with bytes.Compare. Each generated table prefixes its keys with an
// encoding of its name, so tables share one KV without overlapping.
//
// Writes become durable with the transaction's checkpoint (Store.StartCommit)
// and not before. Reads see every write of the current transaction and of
// earlier ones, committed or still committing.
//
// Slices passed to a KV may be retained by it only as copies; slices it
// returns or passes to a callback are valid until the next call on the KV,
// and must not be modified.
type KV interface {
	// Get returns the value of key, and whether it exists.
	Get(key []byte) (value []byte, found bool, err error)
	// Put sets the value of key.
	Put(key, value []byte) error
	// Delete removes key. Deleting an absent key is not an error.
	Delete(key []byte) error
	// Scan calls fn for each key in [start, end) in increasing key order,
	// stopping early when fn returns false. A nil end means no upper bound.
	// fn may not call Put or Delete.
	Scan(start, end []byte, fn func(key, value []byte) bool) error
}

// KVStore is a Store offering a KV. The store of a consumer with tables must
// implement it.
type KVStore interface {
	Store
	// KV returns the view of the current transaction.
	KV() KV
}

// Reader is a read-only, ordered key/value view, with KV's Get and Scan.
// Slices it returns or passes to a callback are valid until its next call,
// and must not be modified.
type Reader interface {
	// Get returns the value of key, and whether it exists.
	Get(key []byte) (value []byte, found bool, err error)
	// Scan calls fn for each key in [start, end) in increasing key order,
	// stopping early when fn returns false. A nil end means no upper bound.
	Scan(start, end []byte, fn func(key, value []byte) bool) error
}

// CommittedReader is implemented by stores whose committed state can be
// read while the shard's transactions run, from other goroutines: queries
// of a consumer's tables (package runtime/query) read it. The stores of
// packages store/rocks and store/mem implement it.
type CommittedReader interface {
	// ReadCommitted calls fn with a view of what the store's commits have
	// made durable: as of the last commit whose future resolved without
	// error, or of one that is durable though its future is still to
	// resolve. It never sees the writes of the transaction open, nor those
	// of a commit whose durability is not yet known: a read of what such a
	// commit wrote waits until it is durable, or fails. No commit becomes
	// visible while fn runs: its view is of one commit. fn may be called
	// more than once (a read that must wait ends its run; fn is called again
	// once the commit is durable): it must have no effect but its result.
	// ReadCommitted returns fn's error, ctx's if ctx is done first, or an
	// error if the store failed or was destroyed. fn must not keep the view
	// past its return.
	// ReadCommitted may be called concurrently with itself and with every
	// method of the store.
	ReadCommitted(ctx context.Context, fn func(Reader) error) error
}

// StoreOpener opens the store of a shard. The service provides one per store
// kind; generated applications delegate Application.NewStore to it.
type StoreOpener interface {
	OpenStore(Shard, Recorder) (Store, error)
}

// StoreOpenerFunc adapts a function to a StoreOpener.
type StoreOpenerFunc func(Shard, Recorder) (Store, error)

// OpenStore calls f.
func (f StoreOpenerFunc) OpenStore(s Shard, r Recorder) (Store, error) { return f(s, r) }

// PartitionLister resolves a label selector to the journals it currently
// selects. Generated publishers use it to route published messages to
// partition journals. Implementations typically keep a watch on the brokers
// (client.WatchedList), so the returned function is cheap and stays current.
type PartitionLister interface {
	Partitions(pb.LabelSelector) message.PartitionsFunc
}

// PartitionListerFunc adapts a function to a PartitionLister.
type PartitionListerFunc func(pb.LabelSelector) message.PartitionsFunc

// Partitions calls f.
func (f PartitionListerFunc) Partitions(sel pb.LabelSelector) message.PartitionsFunc { return f(sel) }
