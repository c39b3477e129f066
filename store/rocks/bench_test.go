package rocks

import (
	"encoding/binary"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/linxGnu/grocksdb"
	"go.gazette.dev/core/broker/client"
)

// nopRecorder records nothing: a store over it measures RocksDB and the
// store's own layers, without a recovery log.
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

const benchTxnOps = 1000

func benchKey(b []byte, i int) []byte {
	b = append(b[:0], 't', '/')
	return binary.BigEndian.AppendUint64(b, uint64(i)*2654435761%1_000_003)
}

// runPutGet puts a key and gets an earlier one n times, committing every
// benchTxnOps, through the store's KV.
func runStorePutGet(b *testing.B, s *Store, n int) time.Duration {
	var k, k2 []byte
	var value = make([]byte, 100)
	var start = time.Now()
	for i := range n {
		k = benchKey(k, i)
		if err := s.Put(k, value); err != nil {
			b.Fatal(err)
		}
		k2 = benchKey(k2, i/2)
		if _, ok, err := s.Get(k2); err != nil || !ok {
			b.Fatalf("Get: %v %v", ok, err)
		}
		if i%benchTxnOps == benchTxnOps-1 {
			await(b, s.StartCommit(nil, checkpointAt(int64(i)), nil))
		}
	}
	return time.Since(start)
}

// runRawPutGet does the same through grocksdb directly: an indexed batch
// read through to the database, written every benchTxnOps.
func runRawPutGet(b *testing.B, db *grocksdb.DB, n int) time.Duration {
	var ro, wo = grocksdb.NewDefaultReadOptions(), grocksdb.NewDefaultWriteOptions()
	defer ro.Destroy()
	defer wo.Destroy()
	var wb = grocksdb.NewWriteBatchWI(0, true)
	defer func() { wb.Destroy() }()
	var k, k2 []byte
	var value = make([]byte, 100)
	var start = time.Now()
	for i := range n {
		k = benchKey(k, i)
		wb.Put(k, value)
		k2 = benchKey(k2, i/2)
		var v, err = wb.GetFromDB(db, ro, k2)
		if err != nil || !v.Exists() {
			b.Fatalf("Get: %v", err)
		}
		_ = append([]byte(nil), v.Data()...)
		v.Free()
		if i%benchTxnOps == benchTxnOps-1 {
			if err = db.WriteWI(wo, wb); err != nil {
				b.Fatal(err)
			}
			wb.Destroy()
			wb = grocksdb.NewWriteBatchWI(0, true)
		}
	}
	return time.Since(start)
}

// BenchmarkPutGetOverhead compares Put and Get through the store's KV (over
// a recorder which records nothing) with the same work done through raw
// grocksdb, and reports their ratio (goal: at most 1.10). Raw grocksdb reads
// a transaction's own writes through an indexed batch (WriteBatchWithIndex),
// as the store did before its overlay.
func BenchmarkPutGetOverhead(b *testing.B) {
	var s, err = Open(b.TempDir(), &nopRecorder{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Destroy()
	var opts = grocksdb.NewDefaultOptions()
	opts.SetCreateIfMissing(true)
	opts.SetCompression(grocksdb.LZ4Compression)
	var bbto = grocksdb.NewDefaultBlockBasedTableOptions()
	var cache = grocksdb.NewLRUCache(DefaultBlockCacheBytes)
	bbto.SetBlockCache(cache)
	bbto.SetFilterPolicy(grocksdb.NewBloomFilter(10))
	opts.SetBlockBasedTableFactory(bbto)
	db, err := grocksdb.OpenDb(opts, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { db.Close(); opts.Destroy(); bbto.Destroy(); cache.Destroy() }()

	b.ResetTimer()
	var n = max(b.N, benchTxnOps)
	// Alternate halves, so that neither side runs only on a warm machine.
	var raw = runRawPutGet(b, db, n/2)
	var store = runStorePutGet(b, s, n/2)
	raw += runRawPutGet(b, db, n/2)
	store += runStorePutGet(b, s, n/2)
	b.StopTimer()
	b.ReportMetric(float64(store.Nanoseconds())/float64(n), "store-ns/op")
	b.ReportMetric(float64(raw.Nanoseconds())/float64(n), "raw-ns/op")
	b.ReportMetric(float64(store)/float64(raw), "store/raw")
}

// runCommits commits n transactions of 1000 Puts of 100 bytes in lockstep:
// a transaction's writes overlap its predecessor's commit, and it commits
// once that one has. Its time is bound by the latency of commits.
func runCommits(b *testing.B, s *Store, n int, base int) time.Duration {
	var k []byte
	var value = make([]byte, 100)
	var prev client.OpFuture
	var start = time.Now()
	for i := range n {
		for j := range 1000 {
			k = benchKey(k, (base+i)*1000+j)
			if err := s.Put(k, value); err != nil {
				b.Fatal(err)
			}
		}
		if prev != nil {
			await(b, prev)
		}
		prev = s.StartCommit(nil, checkpointAt(int64(base+i)), nil)
	}
	await(b, prev)
	return time.Since(start)
}

// runStream puts n values of 100 bytes as a pipelined consumer does: writes
// never wait for commits. A transaction closes, and commits, as soon as its
// predecessor has committed, so transactions grow to cover the latency of
// commits. It returns the time taken and the number of commits.
func runStream(b *testing.B, s *Store, n int, base int) (time.Duration, int) {
	var k []byte
	var value = make([]byte, 100)
	var prev client.OpFuture
	var commits int
	var start = time.Now()
	for i := range n {
		k = benchKey(k, base+i)
		if err := s.Put(k, value); err != nil {
			b.Fatal(err)
		}
		if prev != nil {
			select {
			case <-prev.Done():
				if err := prev.Err(); err != nil {
					b.Fatal(err)
				}
			default:
				continue // The predecessor is still committing: keep consuming.
			}
		}
		prev, commits = s.StartCommit(nil, checkpointAt(int64(base+i)), nil), commits+1
	}
	if prev != nil {
		await(b, prev)
	}
	await(b, s.StartCommit(nil, checkpointAt(int64(base+n)), nil))
	return time.Since(start), commits + 1
}

// BenchmarkRecorderThroughput compares the write throughput of a store
// recording into a recovery log on devstack with one recording nothing,
// written as the runtime's pipelined transactions write (goal: on/off of at
// least 0.9). Each op is 1000 Puts. It also reports the time of lockstep
// transactions of 1000 Puts, each waiting for its predecessor's commit,
// which measures the latency a commit adds.
func BenchmarkRecorderThroughput(b *testing.B) {
	var on = openRecorded(b, newLog(b), 0xA1, Options{})
	defer on.store.Destroy()
	var off, err = Open(b.TempDir(), &nopRecorder{}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer off.Destroy()

	b.ResetTimer()
	var n = max(b.N, 10)
	// Alternate rounds, so that load from elsewhere on the machine weighs on
	// both sides alike.
	const rounds = 8
	var puts = max(n*1000/rounds, 1000)
	var tOn, tOff, cpuOn, cpuOff time.Duration
	var cOn, cOff int
	for r := range rounds {
		var cpu = processCPU(b)
		var t, c = runStream(b, off, puts, r*puts)
		tOff, cOff = tOff+t, cOff+c
		cpuOff += processCPU(b) - cpu

		cpu = processCPU(b)
		t, c = runStream(b, on.store, puts, r*puts)
		tOn, cOn = tOn+t, cOn+c
		cpuOn += processCPU(b) - cpu
	}

	var lOff = runCommits(b, off, n/2, rounds*puts)
	var lOn = runCommits(b, on.store, n/2, rounds*puts)
	b.StopTimer()

	b.ReportMetric(float64(tOn.Nanoseconds())/float64(n), "on-ns/op")
	b.ReportMetric(float64(tOff.Nanoseconds())/float64(n), "off-ns/op")
	b.ReportMetric(float64(rounds*puts)/float64(cOn), "on-puts/txn")
	b.ReportMetric(float64(rounds*puts)/float64(cOff), "off-puts/txn")
	b.ReportMetric(float64(tOff)/float64(tOn), "on/off-throughput")
	b.ReportMetric(float64(lOn)/float64(lOff), "on/off-lockstep-latency")
	b.ReportMetric(float64(cpuOn)/float64(cpuOff), "on/off-cpu")
}

// processCPU is the CPU time used by this process so far, in user and
// system mode: here, the store's, RocksDB's and the in-process brokers'.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
