package rocks

import (
	"context"
	"fmt"
	"testing"

	"github.com/gazconsumer/gazconsumer/store/rocks/membudget"
)

// BenchmarkOpenLinked times the open of a new shard's store on links of its
// parent's files, as a rescale's new shard opens it (Opener.LinkFiles, then
// Open), with a member's memory budget: a parent of 400,000 rows of some
// 150 bytes in tables, and a write-ahead log of some 3.5 MB its memtable
// has not flushed, as bench/cmd/rescalebench's parents have at their split
// (where the open took 0.26 to 0.46 s, beside the split's load). An operation is an
// open; the links are made anew for each, untimed. (RocksDB's options
// skip_stats_update_on_db_open and skip_checking_sst_file_sizes_on_db_open
// made no difference to it.)
func BenchmarkOpenLinked(b *testing.B) {
	b.StopTimer() // Until the opens.
	var ctx = context.Background()
	var budget, err = NewBudget(membudget.Default())
	if err != nil {
		b.Fatal(err)
	}
	defer budget.Close()
	var p = openRecorded(b, newLog(b), 0xB1, Options{Budget: budget})
	defer p.store.Destroy()

	var cp int64
	for i := 0; i < 400_000; i += 2000 {
		cp++
		commitAccounts(b, p.store, i, i+2000, cp)
	}
	if err = p.store.DB().Flush(flushOpts()); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 24_000; i += 2000 {
		cp++
		commitAccounts(b, p.store, i*7%400_000, i*7%400_000+2000, cp)
	}
	var walMB = float64(walBytesIn(p.dir)) / 1e6

	b.ReportMetric(walMB, "wal-MB")
	for range b.N {
		var rec, dir = playRecorder(b, newLog(b), 0xB2)
		if err := (Opener{}).LinkFiles(ctx, p.store, rec); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		var c, err = Open(dir, rec, Options{Budget: budget})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		c.Destroy()
	}
}

// commitAccounts commits rows from through to (not included) of a ledger's
// accounts, three a customer, of values of 120 bytes which vary with the
// row and the checkpoint cp, as of cp.
func commitAccounts(t testing.TB, s *Store, from, to int, cp int64) {
	t.Helper()
	var value = make([]byte, 120)
	for i := from; i < to; i++ {
		value[0], value[1], value[2] = byte(i), byte(i>>8), byte(cp)
		if err := s.Put(fmt.Appendf(nil, "customer-%07d/account-%d", i/3, i%3), value); err != nil {
			t.Fatal(err)
		}
	}
	await(t, s.StartCommit(nil, checkpointAt(cp), nil))
}
