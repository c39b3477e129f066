package rocks

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
)

// BenchmarkForkCopy is the store's part of a local fork of a rescale: a
// read of a parent store's whole state (200,000 rows), half of whose rows
// are copied, loaded into a new store (runtime.LoadRows) and committed, as a new shard
// of a split in two keeps what it owns.
func BenchmarkForkCopy(b *testing.B) {
	const rows = 200_000
	var parent = openRecorded(b, newLog(b), 0xF1, Options{})
	defer parent.store.Destroy()
	var value = make([]byte, 80)
	for i := range rows {
		if err := parent.store.Put(fmt.Appendf(nil, "account/customer-%07d/%d", i/4, i%4), value); err != nil {
			b.Fatal(err)
		}
	}
	await(b, parent.store.StartCommit(nil, checkpointAt(1), nil))
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		var child = openRecorded(b, newLog(b), recoverylog.Author(0xF200+i), Options{})
		b.StartTimer()
		var keys, values [][]byte
		if err := parent.store.ReadState(context.Background(), nil, func(r runtime.Reader) error {
			var n int
			return r.Scan([]byte("account/"), []byte("account0"), func(key, value []byte) bool {
				if n++; n%2 == 0 {
					keys, values = append(keys, bytes.Clone(key)), append(values, bytes.Clone(value))
				}
				return true
			})
		}); err != nil {
			b.Fatal(err)
		}
		var kept, err = runtime.LoadRows(child.store, func(yield func(k, v []byte) bool) {
			for i := range keys {
				if !yield(keys[i], values[i]) {
					return
				}
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		await(b, child.store.StartCommit(nil, checkpointAt(1), nil))
		b.StopTimer()
		child.store.Destroy()
		b.StartTimer()
		if kept != rows/2 {
			b.Fatalf("kept %d rows, want %d", kept, rows/2)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*rows/2), "ns/row")
}
