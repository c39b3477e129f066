package txnkv_test

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"go.gazette.dev/core/broker/client"
)

// model is what an overlay should hold: each key's value, or nil if it is
// deleted.
type model map[string][]byte

// checkOverlay fails t unless o holds exactly m, by Get, Len, Bytes and an
// ascent in key order.
func checkOverlay(t testing.TB, o *txnkv.Overlay, m model, when string) {
	t.Helper()
	var n int
	for k, v := range m {
		e, ok := o.Get([]byte(k))
		if !ok || e.Deleted != (v == nil) || !bytes.Equal(e.Value, v) {
			t.Fatalf("%s: Get(%q) = %+v, %v; want %q (deleted %v)", when, k, e, ok, v, v == nil)
		}
		n += len(k) + len(v)
	}
	if o.Len() != len(m) || o.Bytes() != n {
		t.Fatalf("%s: Len %d, Bytes %d; want %d, %d", when, o.Len(), o.Bytes(), len(m), n)
	}
	var got []string
	o.Ascend(nil, nil, func(e txnkv.Entry) bool { got = append(got, string(e.Key)); return true })
	if want := slices.Sorted(maps.Keys(m)); !slices.Equal(got, want) {
		t.Fatalf("%s: ascended %q, want %q", when, got, want)
	}
}

// A rollback undoes every write since the savepoint: rewrites of keys
// written before take back their values (deletions too), and keys first
// written since are gone, from the map, the order and the counts. Writes
// after a rollback, and after a release, are kept.
func TestSavepoint(t *testing.T) {
	for _, mode := range []string{"plain", "scanned", "colliding"} {
		t.Run(mode, func(t *testing.T) {
			if mode == "colliding" {
				defer txnkv.CollideKeys(3)()
			}
			var o = txnkv.NewOverlay()
			defer o.Release()
			var m = model{}
			var put = func(k, v string) { o.Put([]byte(k), []byte(v)); m[k] = []byte(v) }
			var del = func(k string) { o.Delete([]byte(k)); m[k] = nil }
			for i := range 300 { // More than a chunk of entries.
				put(fmt.Sprintf("k%03d", i), fmt.Sprintf("v%d", i))
			}
			del("k007")
			if mode == "scanned" {
				checkOverlay(t, o, m, "before the savepoint") // Indexes the entries.
			}
			var before = maps.Clone(m)

			o.Savepoint()
			put("k001", "a much longer value than the first")
			put("k001", "x")
			del("k002")
			put("k007", "back")
			for i := range 400 {
				put(fmt.Sprintf("new%03d", i), "n")
				if mode == "scanned" && i == 100 {
					checkOverlay(t, o, m, "within the savepoint")
				}
			}
			o.RollbackToSavepoint()
			m = maps.Clone(before)
			checkOverlay(t, o, m, "rolled back")

			// Again, from the same savepoint.
			put("k003", "y")
			put("again", "z")
			o.RollbackToSavepoint()
			m = maps.Clone(before)
			checkOverlay(t, o, m, "rolled back again")

			put("k004", "kept")
			put("kept", "too")
			o.ReleaseSavepoint()
			checkOverlay(t, o, m, "released")

			// A new savepoint starts where the writes are.
			o.Savepoint()
			put("k004", "gone")
			put("gone", "gone")
			o.RollbackToSavepoint()
			delete(m, "gone")
			m["k004"] = []byte("kept")
			checkOverlay(t, o, m, "second savepoint")
			o.ReleaseSavepoint()

			o.Freeze()
			checkOverlay(t, o, m, "frozen")
		})
	}
}

// The Store's savepoint is its transaction's: a rollback undoes what its KV
// wrote, and its commit holds only what was kept.
func TestStoreSavepoint(t *testing.T) {
	var s = txnkv.New("test", &base{rows: map[string]string{}, durable: client.NewAsyncOperation()})
	defer s.Destroy()
	if err := s.Put([]byte("a"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	s.Savepoint()
	_ = s.Put([]byte("a"), []byte("2"))
	_ = s.Put([]byte("b"), []byte("2"))
	s.RollbackToSavepoint()
	s.ReleaseSavepoint()
	if v, ok, err := s.Get([]byte("a")); err != nil || !ok || string(v) != "1" {
		t.Errorf("a = %q, %v, %v; want 1", v, ok, err)
	}
	if _, ok, err := s.Get([]byte("b")); err != nil || ok {
		t.Errorf("b exists: %v, %v", ok, err)
	}
}

// FuzzSavepoint runs random writes, savepoints, rollbacks and releases, with
// scans between them, against a model of what the overlay holds.
func FuzzSavepoint(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 10, 11, 4, 12, 13, 5, 14, 4, 15, 6})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 4096 {
			return
		}
		var o = txnkv.NewOverlay()
		defer o.Release()
		var m, saved model
		m = model{}
		for i, op := range ops {
			var key = fmt.Sprintf("k%d", op%23)
			switch op % 8 {
			case 0, 1, 2:
				// Ops 1 and 2 read a key first, as a handler does before a
				// write: 1 the key written (which the write then takes
				// without a lookup), 2 another.
				if op%8 != 0 {
					var read = key
					if op%8 == 2 {
						read = fmt.Sprintf("k%d", (op/8)%23)
					}
					var e, ok = o.FindForWrite([]byte(read), txnkv.HashKey([]byte(read)))
					if want, had := m[read]; ok != had || ok && (e.Deleted != (want == nil) || !bytes.Equal(e.Value, want)) {
						t.Fatalf("op %d: FindForWrite(%q) = %+v, %v; want %q, %v", i, read, e, ok, want, had)
					}
				}
				var v = bytes.Repeat([]byte{op}, int(op%5))
				o.Put([]byte(key), v)
				m[key] = v
			case 3:
				o.Delete([]byte(key))
				m[key] = nil
			case 4:
				o.Savepoint()
				saved = maps.Clone(m)
			case 5:
				if saved != nil {
					o.RollbackToSavepoint()
					m = maps.Clone(saved)
				}
			case 6:
				o.ReleaseSavepoint()
				saved = nil
			case 7:
				checkOverlay(t, o, m, fmt.Sprintf("op %d", i))
			}
		}
		checkOverlay(t, o, m, "end")
	})
}
