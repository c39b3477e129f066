// Package anchor is the benchmark's anchor: the per-key sums consumer
// written by hand on Gazette's own consumer framework
// (go.gazette.dev/core/consumer) and its RocksDB store
// (consumer/store-rocksdb), as a user of that library writes one, following
// Gazette's examples/word-count: sums are folded into an in-memory map
// within a transaction, filled from the database on a miss, and written to
// the store's WriteBatch as the transaction finalizes.
package anchor

import (
	"encoding/binary"
	"fmt"

	"github.com/gazconsumer/gazconsumer/bench/anchor/anchorpb"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/consumer"
	"go.gazette.dev/core/consumer/recoverylog"
	store_rocksdb "go.gazette.dev/core/consumer/store-rocksdb"
	"go.gazette.dev/core/mainboilerplate/runconsumer"
	"go.gazette.dev/core/message"
)

// Summer keeps the sum of each key. It implements runconsumer.Application.
type Summer struct{}

var _ runconsumer.Application = Summer{}

type config struct {
	runconsumer.BaseConfig
}

// NewConfig returns the configuration of the consumer: Gazette's base
// configuration, with nothing of its own.
func (Summer) NewConfig() runconsumer.Config { return new(config) }

// InitApplication has nothing to initialize.
func (Summer) InitApplication(runconsumer.InitArgs) error { return nil }

// NewStore builds a recorded RocksDB store for the shard, whose Cache holds
// the sums of the current transaction.
func (Summer) NewStore(_ consumer.Shard, rec *recoverylog.Recorder) (consumer.Store, error) {
	var rdb = store_rocksdb.NewStore(rec)
	rdb.Cache = make(map[string]int64)
	return rdb, rdb.Open()
}

// NewMessage returns an Add, whatever the journal.
func (Summer) NewMessage(*pb.JournalSpec) (message.Message, error) { return new(anchorpb.Add), nil }

// ConsumeMessage folds an Add into the running sum of its key.
func (Summer) ConsumeMessage(_ consumer.Shard, store consumer.Store, env message.Envelope, _ *message.Publisher) error {
	var rdb = store.(*store_rocksdb.Store)
	var cache = rdb.Cache.(map[string]int64)
	var m = env.Message.(*anchorpb.Add)

	var prior, ok = cache[m.Key]
	if !ok {
		// Fill from the database.
		if b, err := rdb.DB.GetBytes(rdb.ReadOptions, []byte(m.Key)); err != nil {
			return err
		} else if len(b) != 0 {
			var v, n = binary.Varint(b)
			if n <= 0 {
				return fmt.Errorf("decoding the sum of %q: bad varint", m.Key)
			}
			prior = v
		}
	}
	cache[m.Key] = prior + m.Value
	return nil
}

// FinalizeTxn writes the transaction's sums to the store's WriteBatch, which
// the store commits with the transaction's checkpoint.
func (Summer) FinalizeTxn(_ consumer.Shard, store consumer.Store, _ *message.Publisher) error {
	var rdb = store.(*store_rocksdb.Store)
	var cache = rdb.Cache.(map[string]int64)
	var b []byte
	for key, sum := range cache {
		delete(cache, key)
		b = binary.AppendVarint(append(b[:0], key...), sum)
		rdb.WriteBatch.Put(b[:len(key)], b[len(key):])
	}
	return nil
}
