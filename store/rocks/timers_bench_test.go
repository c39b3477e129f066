package rocks_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.gazette.dev/core/broker/client"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/gazconsumer/gazconsumer/keyenc"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/table"
	"github.com/gazconsumer/gazconsumer/store/mem"
	"github.com/gazconsumer/gazconsumer/store/rocks"
)

// benchStore is a store of the benchmarks.
type benchStore interface {
	runtime.KVStore
}

// benchStores open the stores the benchmarks compare: RocksDB without a
// recovery log, as a shard's, and the in-memory store of tests.
var benchStores = []struct {
	name string
	open func(b *testing.B) benchStore
}{
	{"rocks", func(b *testing.B) benchStore {
		var s, err = rocks.Open(b.TempDir(), new(nopRecorder), rocks.Options{})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}},
	{"mem", func(*testing.B) benchStore { return mem.Open(mem.NewDB()) }},
}

// nopRecorder records nothing: a RocksDB store without a recovery log.
type nopRecorder struct{ next atomic.Uint64 }

func (r *nopRecorder) NewWritableFile(string) (recoverylog.Fnode, error) {
	return recoverylog.Fnode(r.next.Add(1)), nil
}
func (*nopRecorder) Append(recoverylog.Fnode, []byte) error                  { return nil }
func (*nopRecorder) PositionedAppend(recoverylog.Fnode, []byte, int64) error { return nil }
func (*nopRecorder) Sync(recoverylog.Fnode) error                            { return nil }
func (*nopRecorder) Close(recoverylog.Fnode) error                           { return nil }
func (*nopRecorder) Rename(string, string) error                             { return nil }
func (*nopRecorder) Link(string, string) error                               { return nil }
func (*nopRecorder) Delete(string) error                                     { return nil }
func (*nopRecorder) Barrier(client.OpFutures) client.OpFuture {
	return client.FinishedOperation(nil)
}

// benchShard is the shard of the benchmarks.
type benchShard struct{}

func (benchShard) Context() context.Context                 { return context.Background() }
func (benchShard) Spec() *pc.ShardSpec                      { return &pc.ShardSpec{Id: "bench"} }
func (benchShard) Assignment() keyspace.KeyValue            { return keyspace.KeyValue{} }
func (benchShard) JournalClient() client.AsyncJournalClient { return nil }

// A timer of the benchmarks is a FieldDescriptorProto keyed by its name;
// by hand, its row carries the tick it is due at as its number.
var benchTimers = table.NewSchema(table.Def[string, *descriptorpb.FieldDescriptorProto]{
	Name:   "timer:bench",
	Key:    []string{"name"},
	KeyOf:  func(r *descriptorpb.FieldDescriptorProto) string { return r.GetName() },
	Fields: func(k *string, c *table.Codec) { table.String(c, k, keyenc.Ascending) },
})

var benchRows = table.NewSchema(table.Def[string, *descriptorpb.FieldDescriptorProto]{
	Name:   "deadlines",
	Key:    []string{"name"},
	KeyOf:  func(r *descriptorpb.FieldDescriptorProto) string { return r.GetName() },
	Fields: func(k *string, c *table.Codec) { table.String(c, k, keyenc.Ascending) },
})

type benchHandler interface {
	OnFire(tx *benchTxn, msg *descriptorpb.FieldDescriptorProto) error
	FinalizeTxn(tx *benchTxn) error
}

type benchTxn struct{ runtime.Txn }

// firer counts the timers fired.
type firer struct{ fired int }

func (f *firer) OnFire(*benchTxn, *descriptorpb.FieldDescriptorProto) error { f.fired++; return nil }
func (f *firer) FinalizeTxn(*benchTxn) error                                { return nil }

// commit commits the store's transaction, and waits for it.
func commit(b *testing.B, store runtime.Store) {
	b.Helper()
	if err := store.StartCommit(benchShard{}, pc.Checkpoint{}, nil).Err(); err != nil {
		b.Fatal(err)
	}
}

const (
	benchTicks    = 100  // Transactions firing the timers, one a tick.
	benchPerSetTx = 1000 // Timers set a transaction.
)

// BenchmarkTimers sets timers in transactions of 1000, due over 100 ticks,
// and fires them, a transaction a tick, through the runtime: each tick
// reads the index of what falls due through the tick's time. It reports
// the CPU time a timer (set and fired).
func BenchmarkTimers(b *testing.B) {
	for _, st := range benchStores {
		for _, n := range []int{100_000, 1_000_000} {
			b.Run(fmt.Sprintf("%s/%d", st.name, n), func(b *testing.B) {
				for range b.N {
					var f = new(firer)
					var c = &runtime.Consumer[benchHandler, *benchTxn]{
						Name:        "bench.Timers",
						NewTxn:      func(runtime.KV) *benchTxn { return new(benchTxn) },
						FinalizeTxn: benchHandler.FinalizeTxn,
						Timers:      []runtime.Timing[benchHandler, *benchTxn]{table.Fires(benchTimers, benchHandler.OnFire)},
					}
					var a, err = runtime.NewAdapter(c, benchHandler(f), nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					var store = st.open(b)
					var epoch = time.Unix(0, 0)
					var ts = benchTimers.OpenTimers(store.KV())
					var began = time.Now()
					for i := range n {
						var name = fmt.Sprintf("timer-%07d", i)
						if err = ts.Set(&descriptorpb.FieldDescriptorProto{Name: proto.String(name)}, epoch.Add(time.Duration(i%benchTicks+1)*time.Second)); err != nil {
							b.Fatal(err)
						}
						if i%benchPerSetTx == benchPerSetTx-1 {
							commit(b, store)
						}
					}
					commit(b, store)
					var set = time.Since(began)
					for tick := 1; tick <= benchTicks; tick++ {
						if err = a.BeginTxn(benchShard{}, store); err != nil {
							b.Fatal(err)
						} else if _, err = a.Fire(benchShard{}, store, epoch.Add(time.Duration(tick)*time.Second), nil, runtime.TxnBound{}); err != nil {
							b.Fatal(err)
						}
						_ = a.FinishTxn(benchShard{}, store, nil)
						commit(b, store)
					}
					if f.fired != n {
						b.Fatalf("fired %d of %d", f.fired, n)
					}
					b.ReportMetric(float64(set.Nanoseconds())/float64(n), "set-ns/timer")
					b.ReportMetric(float64(time.Since(began).Nanoseconds())/float64(n), "ns/timer")
					store.Destroy()
				}
			})
		}
	}
}

// BenchmarkTimersByHand is BenchmarkTimers written by hand, as a consumer
// without timers would: a table of deadlines (the tick each is due at),
// scanned whole at each tick for those due, which it deletes. Its cost a
// timer grows with the ticks a timer waits.
func BenchmarkTimersByHand(b *testing.B) {
	for _, st := range benchStores {
		for _, n := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/%d", st.name, n), func(b *testing.B) {
				for range b.N {
					var store = st.open(b)
					var rows = benchRows.Open(store.KV())
					var began = time.Now()
					for i := range n {
						var name = fmt.Sprintf("timer-%07d", i)
						if err := rows.Put(&descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(int32(i%benchTicks + 1))}); err != nil {
							b.Fatal(err)
						}
						if i%benchPerSetTx == benchPerSetTx-1 {
							commit(b, store)
						}
					}
					commit(b, store)
					var set = time.Since(began)
					var fired int
					for tick := int32(1); tick <= benchTicks; tick++ {
						var due []string
						if err := rows.Scan(func(r *descriptorpb.FieldDescriptorProto) bool {
							if r.GetNumber() <= tick {
								due = append(due, r.GetName())
							}
							return true
						}); err != nil {
							b.Fatal(err)
						}
						for _, name := range due {
							if err := rows.Delete(name); err != nil {
								b.Fatal(err)
							}
							fired++
						}
						commit(b, store)
					}
					if fired != n {
						b.Fatalf("fired %d of %d", fired, n)
					}
					b.ReportMetric(float64(set.Nanoseconds())/float64(n), "set-ns/timer")
					b.ReportMetric(float64(time.Since(began).Nanoseconds())/float64(n), "ns/timer")
					store.Destroy()
				}
			})
		}
	}
}
