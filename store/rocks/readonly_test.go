package rocks

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/store/txnkv"
)

// A log played read-only yields the committed state and checkpoint, refuses
// writes, and leaves the log's writer able to commit.
func TestPlayReadOnly(t *testing.T) {
	var journal = newLog(t)
	var a = openRecorded(t, journal, 0xA1, Options{})
	defer a.store.Destroy()

	var want = make(map[string]string)
	for i := range 50 {
		var k, v = fmt.Sprintf("k%03d", i%17), fmt.Sprintf("v%d", i)
		if err := a.store.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
		if i%10 == 9 {
			await(t, a.store.StartCommit(nil, checkpointAt(int64(i)), nil))
		}
	}
	if err := a.store.DB().Flush(flushOpts()); err != nil { // Some state in SSTs, the rest in the WAL.
		t.Fatal(err)
	}
	_ = a.store.Put([]byte("k100"), []byte("after-flush"))
	want["k100"] = "after-flush"
	await(t, a.store.StartCommit(nil, checkpointAt(50), nil))
	_ = a.store.Put([]byte("uncommitted"), []byte("x"))

	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var ro, err = PlayReadOnly(ctx, stack.Journals(), journal, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()

	var got = make(map[string]string)
	if err = ro.KV().Scan(nil, nil, func(k, v []byte) bool {
		got[string(k)] = string(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if !mapsEqual(got, want) {
		t.Errorf("read-only store holds %v, want %v", got, want)
	}
	if v, ok, err := ro.Get([]byte("k003")); err != nil || !ok || string(v) != want["k003"] {
		t.Errorf("Get(k003) = %q, %v, %v; want %q", v, ok, err, want["k003"])
	}
	if _, ok, err := ro.Get([]byte("uncommitted")); ok || err != nil {
		t.Errorf("Get(uncommitted) = %v, %v; want not found", ok, err)
	}
	cp, err := ro.Checkpoint()
	if err != nil || cp.Sources["source/a"].ReadThrough != 50 {
		t.Errorf("checkpoint = %v, %v; want read through 50", cp, err)
	}
	if err = ro.KV().Put([]byte("k"), []byte("v")); !errors.Is(err, txnkv.ErrReadOnly) {
		t.Errorf("Put: %v, want txnkv.ErrReadOnly", err)
	}
	if err = ro.KV().Delete([]byte("k001")); !errors.Is(err, txnkv.ErrReadOnly) {
		t.Errorf("Delete: %v, want txnkv.ErrReadOnly", err)
	}

	// The writer was not fenced.
	await(t, a.store.StartCommit(nil, checkpointAt(51), nil))
}
