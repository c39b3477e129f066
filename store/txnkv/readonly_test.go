package txnkv_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gazconsumer/gazconsumer/store/txnkv"
)

// A ReadOnly view reads what was committed but the reserved keys, decodes
// the checkpoint committed with it, fails its writes with ErrReadOnly, and
// names its store in errors if it has a name.
func TestReadOnly(t *testing.T) {
	var at = checkpointAt(7)
	var cp, _ = at.Marshal()
	var b = &base{rows: map[string]string{"a": "1", "b": "2", txnkv.CheckpointKey: string(cp)}}
	var r = txnkv.NewReadOnly("test", b)
	if v, ok, err := r.Get([]byte("a")); err != nil || !ok || string(v) != "1" {
		t.Fatalf("Get(a) = %q, %v, %v", v, ok, err)
	}
	var got []string
	for _, start := range []string{"", "\x00"} {
		got = got[:0]
		if err := r.Scan([]byte(start), nil, func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true }); err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, ",") != "a=1,b=2" {
			t.Fatalf("Scan(%q) = %q, want the unreserved keys", start, got)
		}
	}
	if rt, err := r.ReadThrough(); err != nil || rt["source/a"] != 7 {
		t.Fatalf("ReadThrough = %v, %v", rt, err)
	}
	var err = r.Put([]byte("x"), nil)
	if !errors.Is(err, txnkv.ErrReadOnly) || err.Error() != `store test: put "x": the store is read-only` {
		t.Fatalf("Put: %v", err)
	}
	if err = txnkv.NewReadOnly("", b).Delete([]byte("a")); !errors.Is(err, txnkv.ErrReadOnly) || err.Error() != `delete "a": the store is read-only` {
		t.Fatalf("Delete of an unnamed view: %v", err)
	}

	b.rows[txnkv.CheckpointKey] = "\xff"
	if _, err = r.Checkpoint(); err == nil || !strings.HasPrefix(err.Error(), "store test: decoding checkpoint: ") {
		t.Fatalf("Checkpoint of a corrupt checkpoint: %v", err)
	}
	delete(b.rows, txnkv.CheckpointKey)
	if c, err := r.Checkpoint(); err != nil || len(c.Sources) != 0 {
		t.Fatalf("Checkpoint without one = %v, %v, want a zero one", c, err)
	}
}
