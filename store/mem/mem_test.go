package mem_test

import (
	"context"
	"errors"
	"testing"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/store/mem"
	"github.com/gazconsumer/gazconsumer/store/txnkv"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/keyspace"
)

func checkpointAt(n int64) pc.Checkpoint {
	return pc.Checkpoint{Sources: map[pb.Journal]pc.Checkpoint_Source{"source/a": {ReadThrough: n}}}
}

func await(t testing.TB, op client.OpFuture) error {
	t.Helper()
	<-op.Done()
	return op.Err()
}

func put(t testing.TB, kv runtime.KV, k, v string) {
	t.Helper()
	if err := kv.Put([]byte(k), []byte(v)); err != nil {
		t.Fatal(err)
	}
}

// get returns the value of k, or "<absent>".
func get(t testing.TB, kv runtime.KV, k string) string {
	t.Helper()
	var v, ok, err = kv.Get([]byte(k))
	if err != nil {
		t.Fatal(err)
	} else if !ok {
		return "<absent>"
	}
	return string(v)
}

// A store opened again on its DB resumes from its last commit: it has the
// committed writes and checkpoint, and neither the writes of the
// transaction open when the first store was dropped nor those of a commit
// still waiting for its appends.
func TestReopenResumesFromLastCommit(t *testing.T) {
	var db = mem.NewDB()
	var a = mem.Open(db)
	put(t, a, "k1", "committed")
	put(t, a, "k2", "committed")
	if err := await(t, a.StartCommit(nil, checkpointAt(1), nil)); err != nil {
		t.Fatal(err)
	}
	put(t, a, "k1", "waiting")
	var never = client.NewAsyncOperation() // An append that never completes.
	var waiting = a.StartCommit(nil, checkpointAt(2), client.OpFutures{never: {}})
	if err := a.Delete([]byte("k2")); err != nil {
		t.Fatal(err)
	}
	put(t, a, "k3", "open")
	if got := get(t, a, "k1"); got != "waiting" {
		t.Fatalf("the next transaction reads k1 = %q, not the committing one's", got)
	}
	a.Destroy()
	if err := await(t, waiting); err == nil {
		t.Fatal("a commit abandoned by Destroy succeeded")
	}

	var b = mem.Open(db)
	defer b.Destroy()
	var cp, err = b.RestoreCheckpoint(nil)
	if err != nil || cp.Sources["source/a"].ReadThrough != 1 {
		t.Fatalf("restored checkpoint %v, %v; want read through 1", cp, err)
	}
	for k, want := range map[string]string{"k1": "committed", "k2": "committed", "k3": "<absent>"} {
		if got := get(t, b, k); got != want {
			t.Errorf("reopened: %s = %q, want %q", k, got, want)
		}
	}
}

// Opening a DB fences the store opened on it before.
func TestOpenFencesEarlierStores(t *testing.T) {
	var db = mem.NewDB()
	var a = mem.Open(db)
	defer a.Destroy()
	var b = mem.Open(db)
	defer b.Destroy()
	put(t, a, "k", "a")
	if err := await(t, a.StartCommit(nil, checkpointAt(1), nil)); !errors.Is(err, mem.ErrFenced) {
		t.Fatalf("commit of a fenced store: %v, want ErrFenced", err)
	}
	put(t, b, "k", "b")
	if err := await(t, b.StartCommit(nil, checkpointAt(2), nil)); err != nil {
		t.Fatal(err)
	}
	if got := get(t, db.Snapshot(), "k"); got != "b" {
		t.Fatalf("the DB holds k = %q, want b", got)
	}
}

// A failed append fails the commit, which leaves the DB at the previous
// checkpoint, and every later read of the store.
func TestFailedAppendFailsCommit(t *testing.T) {
	var db = mem.NewDB()
	var s = mem.Open(db)
	defer s.Destroy()
	put(t, s, "a", "1")
	if err := await(t, s.StartCommit(nil, checkpointAt(1), nil)); err != nil {
		t.Fatal(err)
	}
	put(t, s, "b", "2")
	var failed = client.NewAsyncOperation()
	failed.Resolve(errors.New("append failed"))
	if err := await(t, s.StartCommit(nil, checkpointAt(2), client.OpFutures{failed: {}})); err == nil {
		t.Fatal("a commit whose append failed succeeded")
	}
	if _, _, err := s.Get([]byte("a")); err == nil {
		t.Fatal("Get after a failed commit succeeded")
	}
	var snap = db.Snapshot()
	if rt, err := snap.ReadThrough(); err != nil || rt["source/a"] != 1 {
		t.Fatalf("the DB reads through %v, %v; want 1", rt, err)
	}
	if got := get(t, snap, "b"); got != "<absent>" {
		t.Fatalf("the failed commit's write is in the DB: %q", got)
	}
}

// A snapshot is the committed rows as of when it was taken, read-only, and
// its scans skip the reserved keys (the checkpoint).
func TestSnapshot(t *testing.T) {
	var db = mem.NewDB()
	var s = mem.Open(db)
	defer s.Destroy()
	for _, k := range []string{"b", "a", "c"} {
		put(t, s, k, "v"+k)
	}
	if err := await(t, s.StartCommit(nil, checkpointAt(3), nil)); err != nil {
		t.Fatal(err)
	}
	var snap = db.Snapshot()
	put(t, s, "d", "vd")
	if err := await(t, s.StartCommit(nil, checkpointAt(4), nil)); err != nil {
		t.Fatal(err)
	}
	var keys string
	if err := snap.Scan(nil, nil, func(k, v []byte) bool { keys += string(k) + "=" + string(v) + " "; return true }); err != nil {
		t.Fatal(err)
	}
	if keys != "a=va b=vb c=vc " {
		t.Fatalf("snapshot scan: %q", keys)
	}
	if err := snap.Put([]byte("x"), nil); !errors.Is(err, txnkv.ErrReadOnly) {
		t.Fatalf("Put: %v", err)
	}
	if err := snap.Delete([]byte("a")); !errors.Is(err, txnkv.ErrReadOnly) {
		t.Fatalf("Delete: %v", err)
	}
	if got := get(t, db.Snapshot(), "d"); got != "vd" {
		t.Fatalf("a later snapshot lacks d: %q", got)
	}
}

// The Opener keeps a DB per shard, so that a shard's store opened again
// resumes from its last commit.
func TestOpener(t *testing.T) {
	var o mem.Opener
	var open = func(id pc.ShardID) runtime.KVStore {
		var st, err = o.OpenStore(shard{id}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st.(runtime.KVStore)
	}
	var a = open("one")
	put(t, a.KV(), "k", "one")
	if err := await(t, a.StartCommit(nil, checkpointAt(1), nil)); err != nil {
		t.Fatal(err)
	}
	a.Destroy()
	var again, other = open("one"), open("two")
	defer again.Destroy()
	defer other.Destroy()
	if got := get(t, again.KV(), "k"); got != "one" {
		t.Errorf("shard one reopened: k = %q", got)
	}
	if got := get(t, other.KV(), "k"); got != "<absent>" {
		t.Errorf("shard two: k = %q", got)
	}
}

// shard is a runtime.Shard of an ID.
type shard struct{ id pc.ShardID }

func (s shard) Spec() *pc.ShardSpec                    { return &pc.ShardSpec{Id: s.id} }
func (shard) Context() context.Context                 { return context.Background() }
func (shard) Assignment() keyspace.KeyValue            { return keyspace.KeyValue{} }
func (shard) JournalClient() client.AsyncJournalClient { return nil }

// A committed read sees the DB as last committed, not the open transaction.
func TestReadCommitted(t *testing.T) {
	var s = mem.Open(mem.NewDB())
	defer s.Destroy()
	_ = s.Put([]byte("a"), []byte("1"))
	<-s.StartCommit(nil, pc.Checkpoint{}, nil).Done()
	_ = s.Put([]byte("a"), []byte("2"))
	var got string
	var err = s.ReadCommitted(context.Background(), func(r runtime.Reader) error {
		var v, _, err = r.Get([]byte("a"))
		got = string(v)
		return err
	})
	if got != "1" || err != nil {
		t.Fatalf("committed read: %q, %v", got, err)
	}
}
