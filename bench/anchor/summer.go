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
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/gazconsumer/gazconsumer/bench/anchor/anchorpb"
	"github.com/gazconsumer/gazconsumer/bench/internal/workload"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/consumer"
	pc "go.gazette.dev/core/consumer/protocol"
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

// InitApplication serves the sums of the member's shards over HTTP at
// workload.AnchorSumsPath (ServeSums), for the benchmark to check them.
func (Summer) InitApplication(args runconsumer.InitArgs) error {
	args.Server.HTTPMux.Handle(workload.AnchorSumsPath, ServeSums(args.Service))
	return nil
}

// ServeSums returns a handler of GET requests for the committed sums of a
// shard of which the member is primary (?shard=ID): a JSON object from each
// key to its sum, read from a snapshot of the shard's database. The shard
// must have finished its transactions (as after a Stat whose ReadThrough
// it has committed): the sums of a transaction in progress are not there.
func ServeSums(svc *consumer.Service) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var res, err = svc.Resolver.Resolve(consumer.ResolveArgs{
			Context: r.Context(),
			ShardID: pc.ShardID(r.URL.Query().Get("shard")),
		})
		if err != nil {
			http.Error(w, fmt.Sprintf("resolving shard %q: %v", r.URL.Query().Get("shard"), err), http.StatusInternalServerError)
			return
		} else if res.Status != pc.Status_OK || res.Store == nil {
			http.Error(w, fmt.Sprintf("shard %q: %s (not primary here)", r.URL.Query().Get("shard"), res.Status), http.StatusConflict)
			return
		}
		defer res.Done()
		sums, err := sumsOf(res.Store.(*store_rocksdb.Store))
		if err != nil {
			http.Error(w, fmt.Sprintf("shard %s: %v", res.Spec.Id, err), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(sums)
	})
}

// sumsOf reads every sum of rdb's database: every key past the store's own
// (its checkpoint and offsets, whose keys begin with an encoded NULL, 0x00).
func sumsOf(rdb *store_rocksdb.Store) (map[string]int64, error) {
	var it = rdb.DB.NewIterator(rdb.ReadOptions)
	defer it.Close()
	var sums = make(map[string]int64)
	for it.Seek([]byte{0x01}); it.Valid(); it.Next() {
		var key, value = it.Key(), it.Value()
		var v, n = binary.Varint(value.Data())
		if n <= 0 {
			var err = fmt.Errorf("decoding the sum of %q: bad varint", key.Data())
			key.Free()
			value.Free()
			return nil, err
		}
		sums[string(key.Data())] = v
		key.Free()
		value.Free()
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("iterating the sums: %w", err)
	}
	return sums, nil
}

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
