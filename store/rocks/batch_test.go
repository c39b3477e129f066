package rocks

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"github.com/linxGnu/grocksdb"
)

// Batches built in the reused buffer are written whole, whatever the size of
// the one before them (larger, smaller, past what the buffer keeps); a batch
// that outgrows its bound is refused and writes nothing; a freed buffer
// refuses writes.
func TestBatchBufferWritesBatchesOfEverySize(t *testing.T) {
	var db, cdb, cwo = openBatchDB(t)
	var ro = grocksdb.NewDefaultReadOptions()
	defer ro.Destroy()
	var b = newBatchBuffer()
	var err error

	// Rows of 1 KiB: 20,000 of them are past the 8 MiB the buffer keeps
	// after a smaller write.
	for round, rows := range []int{2000, 3, 20000, 1, 20000, 500} {
		var ov = txnkv.NewOverlay()
		for i := range rows {
			ov.Put(fmt.Appendf(nil, "round-%d/key-%06d", round, i), bytes.Repeat([]byte{byte(round + i)}, 1024))
		}
		var cp = fmt.Appendf(nil, "checkpoint %d", round)
		if err := b.write(cdb, cwo, batchLen(ov, len(checkpointKey)+len(cp)), func(buf []byte) []byte {
			return appendBatch(buf, ov, checkpointKey, cp)
		}); err != nil {
			t.Fatalf("round %d (%d rows): %v", round, rows, err)
		}
		for _, i := range []int{0, rows / 2, rows - 1} {
			var v, err = db.GetBytes(ro, fmt.Appendf(nil, "round-%d/key-%06d", round, i))
			if err != nil || !bytes.Equal(v, bytes.Repeat([]byte{byte(round + i)}, 1024)) {
				t.Fatalf("round %d: row %d is %d bytes (%v)", round, i, len(v), err)
			}
		}
		if v, _ := db.GetBytes(ro, checkpointKey); !bytes.Equal(v, cp) {
			t.Fatalf("round %d: checkpoint %q, want %q", round, v, cp)
		}
	}

	// A build which appends past its bound lands in Go memory: refused.
	err = b.write(cdb, cwo, 64, func(buf []byte) []byte {
		var ov = txnkv.NewOverlay()
		ov.Put([]byte("outgrown"), bytes.Repeat([]byte("x"), 100))
		return appendBatch(buf, ov, nil, nil)
	})
	if err == nil || !strings.Contains(err.Error(), "outgrew its bound of 64") {
		t.Fatalf("outgrown batch: got %v", err)
	}
	if v, _ := db.GetBytes(ro, []byte("outgrown")); v != nil {
		t.Fatalf("an outgrown batch was written: %q", v)
	}

	b.free()
	b.free() // Twice is harmless.
	if err = b.write(cdb, cwo, 64, func(buf []byte) []byte { return buf }); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("write after free: got %v", err)
	}
}

// BenchmarkCommitBatch writes commits shaped as the wide workload's (rows
// of a 1,000-byte key and an 8-byte value) to a store recording nothing:
// through the store's reused buffer ("reused"), and as the store wrote them
// before it had one ("copied": a Go buffer made for each commit, then
// copied into a new C++ WriteBatch). It reports the CPU of the process a
// commit beside the time.
func BenchmarkCommitBatch(b *testing.B) {
	for _, rows := range []int{1000, 28000} {
		var ov = txnkv.NewOverlay()
		var key = make([]byte, 1000)
		for i := range rows {
			for j := range key {
				key[j] = 'a' + byte((i*7+j*13+j*j)%26)
			}
			binary.BigEndian.PutUint32(key, uint32(i))
			ov.Put(key, binary.LittleEndian.AppendUint64(nil, uint64(i)))
		}
		var cp = []byte("checkpoint")
		var n = batchLen(ov, len(checkpointKey)+len(cp))
		var sides = map[string]func(d *database) error{
			"reused": func(d *database) error {
				return d.batch.write(d.cdb, d.cwo, n, func(buf []byte) []byte { return appendBatch(buf, ov, checkpointKey, cp) })
			},
			"copied": func(d *database) error {
				var wb = grocksdb.WriteBatchFrom(appendBatch(make([]byte, 0, n), ov, checkpointKey, cp))
				defer wb.Destroy()
				return d.db.Write(d.wo, wb)
			},
		}
		for _, side := range []string{"reused", "copied"} {
			b.Run(fmt.Sprintf("rows=%d/%s", rows, side), func(b *testing.B) {
				var s, err = Open(b.TempDir(), &nopRecorder{}, Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Destroy()
				var cpu = processCPU(b)
				b.ResetTimer()
				for range b.N {
					if err := sides[side]((*database)(s)); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// A buffer keeps its memory across commits of varying sizes, and releases
// it past 8 MiB only after 64 writes in a row that used less than a quarter
// of it.
func TestBatchBufferKeepsItsMemoryAcrossCommits(t *testing.T) {
	var _, cdb, cwo = openBatchDB(t)
	var b = newBatchBuffer()
	defer b.free()

	var write = func(rows int) {
		t.Helper()
		var ov = txnkv.NewOverlay()
		for i := range rows {
			ov.Put(fmt.Appendf(nil, "key-%06d", i), bytes.Repeat([]byte{'v'}, 1024))
		}
		if err := b.write(cdb, cwo, batchLen(ov, 0), func(buf []byte) []byte {
			return appendBatch(buf, ov, nil, nil)
		}); err != nil {
			t.Fatal(err)
		}
	}
	const large = 20000 // About 20 MiB.
	write(large)
	var held = b.capacity()
	if held < 16<<20 {
		t.Fatalf("capacity %d after a batch of about 20 MiB", held)
	}
	for round := range 3 {
		for i := range 63 {
			write(10 + i%50)
			if c := b.capacity(); c != held {
				t.Fatalf("round %d: capacity %d after %d small writes, want %d kept", round, c, i+1, held)
			}
		}
		if round < 2 {
			write(large / 2) // A quarter or more: the count starts again.
		}
	}
	write(10) // The 64th small write in a row.
	if c := b.capacity(); c >= 8<<20 {
		t.Fatalf("capacity %d after 64 small writes in a row, want it released", c)
	}
}

// openBatchDB opens a database for a test of batch buffers, closed as the
// test ends, and returns it, and its and default write options' C handles.
func openBatchDB(t *testing.T) (db *grocksdb.DB, cdb, cwo unsafe.Pointer) {
	var opts = grocksdb.NewDefaultOptions()
	t.Cleanup(opts.Destroy)
	opts.SetCreateIfMissing(true)
	var err error
	if db, err = grocksdb.OpenDb(opts, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	var wo = grocksdb.NewDefaultWriteOptions()
	t.Cleanup(wo.Destroy)
	if cdb, err = cPointer(db); err != nil {
		t.Fatal(err)
	}
	if cwo, err = cPointer(wo); err != nil {
		t.Fatal(err)
	}
	return db, cdb, cwo
}
