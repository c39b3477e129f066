// Package partition maps messages to the partition journals of their
// family, as a consumer's shards assume: shard NN of a consumer reads
// partition NN (the NN-th journal, in name order) of each family it
// consumes, so that messages of equal partition keys, of whichever family,
// meet in one shard. Consumers publishing, producers outside a consumer and
// the routing of queries all map keys here.
//
// A key maps to partition Index(key, n) of n partitions: the 32-bit FNV-1a
// hash of its order-preserving encoding, modulo n. This is Gazette's
// message.ModuloMapping over journals listed in name order, as brokers
// list them.
package partition

import (
	"io"

	"go.gazette.dev/core/message"
)

// Index returns the index, among n partitions, of the partition that
// messages of partition key key (its order-preserving encoding, as a
// generated message's AppendPartitionKey writes it) are published to.
// It is 0 if n is 1 or less.
func Index(key []byte, n int) int {
	if n <= 1 {
		return 0
	}
	return int(fnv32a(key)) % n
}

// fnv32a is the 32-bit FNV-1a hash of b, as hash/fnv's New32a sums it,
// without its allocation and interface calls.
func fnv32a(b []byte) uint32 {
	const offset, prime = 2166136261, 16777619
	var h uint32 = offset
	for _, c := range b {
		h ^= uint32(c)
		h *= prime
	}
	return h
}

// Keyed is implemented by generated journal messages having a partition
// key.
type Keyed interface {
	AppendPartitionKey([]byte) []byte
}

// KeyOf is a message.MappingKeyFunc writing the partition key of a Keyed
// message.
func KeyOf(m message.Mappable, w io.Writer) {
	_, _ = w.Write(m.(Keyed).AppendPartitionKey(nil))
}

// Mapping returns the MappingFunc of messages whose partition keys key
// writes, among the journals partitions lists in name order: a message goes
// to the journal of index Index(key, len(journals)). A nil key spreads
// messages over the journals at random (they have no partition key).
func Mapping(key message.MappingKeyFunc, partitions message.PartitionsFunc) message.MappingFunc {
	if key == nil {
		return message.RandomMapping(partitions)
	}
	return message.ModuloMapping(key, partitions)
}
