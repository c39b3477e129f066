package mem_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/mem"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	"go.gazette.dev/core/broker/client"
	pc "go.gazette.dev/core/consumer/protocol"
)

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

// Operations of a FuzzStoresAgree program: the low three bits of a byte.
const (
	opPut, opPut2, opDelete, opGet, opScan, opCommit, opSettle, opCheck = 0, 1, 2, 3, 4, 5, 6, 7
)

// FuzzStoresAgree runs the same program of Puts, Deletes, Gets, Scans and
// pipelined commits on an in-memory store and a RocksDB store, and checks
// that every read and commit of one agrees with the other's, and with a
// model of the keys: reads see the current transaction's writes, those of a
// commit still in flight, and the committed ones, the later winning, and
// restored checkpoints are those of the last commit applied.
//
// A program byte is an operation (its low three bits) on one of eight keys
// (the next three). A commit waits on a gate, which the next commit or
// settle resolves, so that the operations between see it in flight; a
// check of key 7 resolves it with an error instead, which fails the commit
// and every read after it in both stores alike.
func FuzzStoresAgree(f *testing.F) {
	var op = func(key, code byte) byte { return key<<3 | code }
	f.Add([]byte{op(1, opPut), op(2, opPut), op(3, opPut), op(1, opCommit), op(1, opPut), op(2, opDelete),
		op(1, opGet), op(2, opGet), op(3, opGet), op(0, opScan), op(1, opScan), op(1, opSettle),
		op(0, opCheck), op(1, opGet), op(2, opGet), op(0, opScan), op(2, opPut), op(1, opCommit), op(1, opDelete),
		op(0, opScan), op(1, opGet), op(2, opGet), op(1, opCommit), op(0, opScan), op(1, opGet), op(0, opCheck)})
	f.Add([]byte{op(1, opGet), op(1, opPut), op(1, opCommit), op(1, opSettle), op(1, opGet), op(2, opGet),
		op(1, opPut), op(1, opCommit), op(1, opSettle), op(1, opGet), op(1, opDelete), op(1, opCommit), op(1, opSettle), op(1, opGet)})
	f.Add([]byte{op(4, opPut), op(5, opPut), op(4, opCommit), op(4, opDelete), op(7, opCheck), op(4, opGet), op(0, opScan)})
	f.Add(bytes.Repeat([]byte{0x08, 0x11, 0x22, 0x03, 0x05, 0x1c, 0x2d, 0x06, 0x37}, 20))
	f.Fuzz(func(t *testing.T, program []byte) {
		var rs, err = rocks.Open(t.TempDir(), &nopRecorder{}, rocks.Options{RowCacheBytes: 400}) // A small row cache turns over.
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Destroy()
		var db = mem.NewDB()
		var ms = mem.Open(db)
		defer ms.Destroy()
		var stores = []runtime.KVStore{ms, rs}

		var model = map[string]string{}
		var failed bool                      // A commit failed: so does every read and commit after it.
		var lastCP, pendingCP int64 = -1, -1 // Read through by the last commit, and the one in flight.
		var gate *client.AsyncOperation
		var pending []client.OpFuture
		// settle resolves the gate of the commits in flight with err, and
		// checks that they agree.
		var settle = func(i int, err error) {
			if gate == nil {
				return
			}
			gate.Resolve(err)
			var errs [2]error
			for n, p := range pending {
				<-p.Done()
				errs[n] = p.Err()
			}
			var wantErr = err != nil || failed
			if (errs[0] != nil) != wantErr || (errs[1] != nil) != wantErr {
				t.Fatalf("op %d: commits resolved with %v (memory) and %v (rocks), resolving the gate with %v", i, errs[0], errs[1], err)
			}
			if failed = wantErr; !failed {
				lastCP = pendingCP
			}
			gate, pending = nil, nil
		}
		for i, b := range program {
			var key = []byte{'k', 'a' + (b>>3)&7}
			switch b & 7 {
			case opPut, opPut2:
				var value = fmt.Appendf(nil, "%d.%d", i, b)
				for _, s := range stores {
					if err := s.KV().Put(key, value); err != nil {
						t.Fatal(err)
					}
				}
				model[string(key)] = string(value)
			case opDelete:
				for _, s := range stores {
					if err := s.KV().Delete(key); err != nil {
						t.Fatal(err)
					}
				}
				delete(model, string(key))
			case opGet:
				var want, wantOK = model[string(key)]
				for n, s := range stores {
					var v, ok, err = s.KV().Get(key)
					if failed {
						if err == nil {
							t.Fatalf("op %d: store %d: Get(%s) after a failed commit succeeded", i, n, key)
						}
					} else if err != nil || ok != wantOK || string(v) != want {
						t.Fatalf("op %d: store %d: Get(%s) = %q %v %v, want %q %v", i, n, key, v, ok, err, want, wantOK)
					}
				}
			case opScan:
				var lo, hi = key, []byte{'k', key[1] + 3}
				if b>>6 == 3 {
					hi = nil // Unbounded.
				}
				for n, s := range stores {
					var got, err = scan(s.KV(), lo, hi)
					if failed {
						if err == nil {
							t.Fatalf("op %d: store %d: Scan after a failed commit succeeded", i, n)
						}
					} else if want := modelScan(model, lo, hi); err != nil || !slices.Equal(got, want) {
						t.Fatalf("op %d: store %d: Scan(%s, %s) = %q %v, want %q", i, n, lo, hi, got, err, want)
					}
				}
			case opCommit:
				settle(i, nil)
				gate = client.NewAsyncOperation()
				for _, s := range stores {
					pending = append(pending, s.StartCommit(nil, checkpointAt(int64(i)), client.OpFutures{gate: {}}))
				}
				pendingCP = int64(i)
			case opSettle:
				settle(i, nil)
			case opCheck:
				if key[1] == 'a'+7 && gate != nil {
					settle(i, errors.New("append failed"))
					continue
				}
				settle(i, nil)
				var cps [2]pc.Checkpoint
				for n, s := range stores {
					var err error
					if cps[n], err = s.RestoreCheckpoint(nil); err != nil {
						t.Fatal(err)
					}
				}
				if got0, got1 := readThrough(cps[0]), readThrough(cps[1]); got0 != lastCP || got1 != lastCP {
					t.Fatalf("op %d: checkpoints read through %d (memory) and %d (rocks), want %d", i, got0, got1, lastCP)
				}
			}
		}
		settle(len(program), nil)
	})
}

// scan returns the keys and values of kv in [lo, hi).
func scan(kv runtime.KV, lo, hi []byte) ([]string, error) {
	var out []string
	var err = kv.Scan(lo, hi, func(k, v []byte) bool {
		out = append(out, string(k)+"="+string(v))
		return true
	})
	return out, err
}

// modelScan returns the keys and values of model in [lo, hi).
func modelScan(model map[string]string, lo, hi []byte) []string {
	var out []string
	for k, v := range model {
		if k >= string(lo) && (hi == nil || k < string(hi)) {
			out = append(out, k+"="+v)
		}
	}
	slices.Sort(out)
	return out
}

// readThrough is how far cp read source/a, or -1 if cp is zero.
func readThrough(cp pc.Checkpoint) int64 {
	if src, ok := cp.Sources["source/a"]; ok {
		return src.ReadThrough
	}
	return -1
}
