package rocks

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"github.com/linxGnu/grocksdb"
	"go.gazette.dev/core/broker/client"
)

// The batch of an overlay is the same WriteBatch as RocksDB's of its writes.
func TestOverlayBatchMatchesRocksDB(t *testing.T) {
	var rng = rand.New(rand.NewPCG(1, 2))
	var ov = txnkv.NewOverlay()
	var model = map[string]txnkv.Entry{}
	for range 2000 {
		var k = make([]byte, 1+rng.IntN(300)) // Past one byte of varint length.
		for i := range k {
			k[i] = byte(rng.IntN(4)) // Small alphabet: keys repeat.
		}
		k = k[:1+rng.IntN(len(k))]
		var v = bytes.Repeat([]byte{byte(rng.Uint32())}, rng.IntN(200))
		var del = rng.IntN(4) == 0
		if del {
			ov.Delete(k)
			v = nil
		} else {
			ov.Put(k, v)
		}
		model[string(k)] = txnkv.Entry{Key: k, Value: v, Deleted: del}
	}
	var want = grocksdb.NewWriteBatch()
	defer want.Destroy()
	var keys = make([]string, 0, len(model))
	for k := range model {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if e := model[k]; e.Deleted {
			want.Delete(e.Key)
		} else {
			want.Put(e.Key, e.Value)
		}
	}
	want.Put(checkpointKey, []byte("checkpoint"))

	var got = appendBatch(nil, ov, checkpointKey, []byte("checkpoint"))
	if !bytes.Equal(got, want.Data()) {
		t.Fatalf("batch of %d bytes differs from RocksDB's of %d bytes", len(got), len(want.Data()))
	}
	if bound := batchLen(ov, len(checkpointKey)+len("checkpoint")); len(got) > bound {
		t.Fatalf("batch of %d bytes exceeds its bound %d", len(got), bound)
	}
	// And RocksDB reads it back as the same records.
	var wb = grocksdb.WriteBatchFrom(got)
	defer wb.Destroy()
	if wb.Count() != len(keys)+1 {
		t.Fatalf("count %d, want %d", wb.Count(), len(keys)+1)
	}
}

// FuzzStoreModel drives a store with Puts, Deletes, Gets, Scans and
// pipelined commits, and checks every read against a model of the keys.
// Reads must see the current transaction's writes, those of a commit in
// flight, and the database's, the later winning.
func FuzzStoreModel(f *testing.F) {
	// op returns the program byte of an op (0-6) on key k (0-15).
	var op = func(k, code byte) byte {
		for b := k << 4; ; b++ {
			if b%7 == code {
				return b
			}
		}
	}
	const put, del, get, scan, commit, finish = 0, 2, 3, 4, 5, 6
	// Writes over a commit in flight, read before and after it finishes.
	f.Add([]byte{op(1, put), op(2, put), op(3, put), op(1, commit), op(1, put), op(2, del),
		op(1, get), op(2, get), op(3, get), op(0, scan), op(1, scan), op(1, finish),
		op(1, get), op(2, get), op(0, scan), op(2, put), op(1, commit), op(1, del), op(0, scan),
		op(1, get), op(2, get), op(1, commit), op(0, scan), op(1, get)})
	// A key read (cached), then rewritten, deleted and read back across
	// commits: with the smallest row cache, and with the default one.
	var rewrites = []byte{op(1, get), op(1, put), op(1, commit), op(1, finish), op(1, get), op(2, get),
		op(1, put), op(1, commit), op(1, finish), op(1, get), op(1, del), op(1, commit), op(1, finish), op(1, get)}
	f.Add(rewrites)
	f.Add(append([]byte{op(0, get)}, rewrites...))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add(bytes.Repeat([]byte{0x10, 0x21, 0x42, 0x83, 0x05, 0x16}, 40))
	f.Add(bytes.Repeat([]byte{0x00, 0x31, 0x04, 0x05, 0x52, 0x03, 0x05, 0x61}, 30))
	f.Fuzz(func(t *testing.T, program []byte) {
		// The program's first byte sizes the row cache: none, one or two
		// rows a generation (so that generations turn over), or the default.
		var rowCache int64
		if len(program) != 0 {
			rowCache = []int64{-1, 150, 400, 0}[program[0]%4]
		}
		var s, err = Open(t.TempDir(), &nopRecorder{}, Options{RowCacheBytes: rowCache})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Destroy()

		var model = map[string]string{}
		// A commit waits on gate, resolved by the next commit or await, so
		// that reads in between see it in flight.
		var pending client.OpFuture
		var gate *client.AsyncOperation
		var settle = func() {
			if pending != nil {
				gate.Resolve(nil)
				await(t, pending)
				pending = nil
			}
		}
		var keyOf = func(b byte) []byte { return []byte{'k', 'a' + b%8} }
		for i, op := range program {
			var k = keyOf(op >> 4)
			switch op % 7 {
			case 0, 1: // Put.
				var v = []byte{byte(i), op}
				if err := s.Put(k, v); err != nil {
					t.Fatal(err)
				}
				model[string(k)] = string(v)
			case 2: // Delete.
				if err := s.Delete(k); err != nil {
					t.Fatal(err)
				}
				delete(model, string(k))
			case 3: // Get.
				var v, ok, err = s.Get(k)
				var want, wantOK = model[string(k)]
				if err != nil || ok != wantOK || string(v) != want {
					t.Fatalf("op %d: Get(%s) = %q %v %v, want %q %v", i, k, v, ok, err, want, wantOK)
				}
			case 4: // Scan of a range.
				var lo, hi = keyOf(op >> 4), keyOf(op>>4 + 3)
				if bytes.Compare(lo, hi) > 0 {
					hi = nil
				}
				checkScan(t, i, s, model, lo, hi)
			case 5: // Start a commit once the previous one is done.
				settle()
				gate = client.NewAsyncOperation()
				pending = s.StartCommit(nil, checkpointAt(int64(i)), client.OpFutures{gate: {}})
			case 6: // Let the commit in flight finish.
				settle()
			}
		}
		checkScan(t, len(program), s, model, nil, nil)
		settle()
		checkScan(t, len(program), s, model, nil, nil)
	})
}

func checkScan(t *testing.T, i int, s *Store, model map[string]string, lo, hi []byte) {
	t.Helper()
	var want []string
	for k, v := range model {
		if bytes.Compare([]byte(k), lo) >= 0 && (hi == nil || bytes.Compare([]byte(k), hi) < 0) {
			want = append(want, k+"="+v)
		}
	}
	slices.Sort(want)
	var got []string
	if err := s.Scan(lo, hi, func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("op %d: Scan(%q, %q) = %q, want %q", i, lo, hi, got, want)
	}
}
