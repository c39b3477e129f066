package rocks

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/linxGnu/grocksdb"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

func checkpointAt(n int64) pc.Checkpoint {
	return pc.Checkpoint{Sources: map[pb.Journal]pc.Checkpoint_Source{
		"source/a": {ReadThrough: n},
	}}
}

func readThrough(t testing.TB, s *Store) int64 {
	t.Helper()
	var cp, err = s.RestoreCheckpoint(nil)
	if err != nil {
		t.Fatal(err)
	} else if cp.Sources == nil {
		return -1
	}
	return cp.Sources["source/a"].ReadThrough
}

// contents scans the whole store.
func contents(t testing.TB, s *Store) map[string]string {
	t.Helper()
	var out = make(map[string]string)
	if err := s.Scan(nil, nil, func(k, v []byte) bool {
		out[string(k)] = string(v)
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func await(t testing.TB, op client.OpFuture) {
	t.Helper()
	<-op.Done()
	if err := op.Err(); err != nil {
		t.Fatal(err)
	}
}

// Many transactions, with flushes and compactions, are recorded; playing the
// log into a new directory rebuilds a store holding every committed key and
// the last checkpoint, and nothing uncommitted. The fenced store then fails
// to commit.
func TestPlaybackRestoresCommittedState(t *testing.T) {
	var journal = newLog(t)
	var o Options
	smallTune(&o)
	var a = openRecorded(t, journal, 0xA1, o)
	defer a.store.Destroy()

	var rng = rand.New(rand.NewPCG(3, 4))
	var want = make(map[string]string)
	var last client.OpFuture
	const txns = 240
	for i := range txns {
		for range 20 {
			var k = fmt.Sprintf("k%05d", rng.IntN(4000))
			var v = strings.Repeat(fmt.Sprintf("%d.", i), 20+rng.IntN(40))
			if err := a.store.Put([]byte(k), []byte(v)); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		}
		var del = fmt.Sprintf("k%05d", rng.IntN(4000))
		if err := a.store.Delete([]byte(del)); err != nil {
			t.Fatal(err)
		}
		delete(want, del)

		if last != nil {
			await(t, last) // As the runtime does: a commit follows its predecessor's.
		}
		last = a.store.StartCommit(nil, checkpointAt(int64(i)), nil)

		// The next transaction sees the committing one's writes.
		for k, v := range want {
			var got, ok, err = a.store.Get([]byte(k))
			if err != nil || !ok || string(got) != v {
				t.Fatalf("txn %d: Get(%s) = %q, %v, %v; want %q", i, k, got, ok, err, v)
			}
			break
		}
		if _, ok, _ := a.store.Get([]byte(del)); ok {
			t.Fatalf("txn %d: deleted %s is found", i, del)
		}
		switch i {
		case txns / 3:
			if err := a.store.DB().Flush(flushOpts()); err != nil {
				t.Fatal(err)
			}
		case 2 * txns / 3:
			a.store.DB().CompactRange(rangeAll())
		}
	}
	await(t, last)
	var sst = a.store.DB().GetProperty("rocksdb.num-files-at-level1")
	t.Logf("level-1 files: %s; level-0: %s", sst, a.store.DB().GetProperty("rocksdb.num-files-at-level0"))
	if got := contents(t, a.store); !mapsEqual(got, want) {
		t.Fatalf("recording store holds %d keys, want %d", len(got), len(want))
	}
	// Uncommitted writes.
	if err := a.store.Put([]byte("uncommitted"), []byte("x")); err != nil {
		t.Fatal(err)
	}

	// Play back as a new author, which fences a.
	var b = openRecorded(t, journal, 0xB2, Options{})
	defer b.store.Destroy()
	if got := readThrough(t, b.store); got != txns-1 {
		t.Fatalf("played-back checkpoint reads through %d, want %d", got, txns-1)
	}
	var got = contents(t, b.store)
	if !mapsEqual(got, want) {
		t.Fatalf("played-back store holds %d keys, want %d", len(got), len(want))
	}

	// The fenced store's recorder fails, and so does its commit.
	var op = a.store.StartCommit(nil, checkpointAt(txns), nil)
	<-op.Done()
	if err := op.Err(); !errors.Is(err, client.ErrRegisterMismatch) {
		t.Fatalf("fenced commit: got %v, want a register mismatch", err)
	}
}

// failingRecorder fails appends once armed.
type failingRecorder struct {
	FileRecorder
	armed chan struct{}
}

var errInjected = errors.New("injected recorder failure")

func (r *failingRecorder) Append(fn recoverylog.Fnode, data []byte) error {
	select {
	case <-r.armed:
		return errInjected
	default:
		return r.FileRecorder.Append(fn, data)
	}
}

// A recorder failure fails the write which caused it, and so the commit.
func TestRecorderFailureFailsCommit(t *testing.T) {
	var real, dir = playRecorder(t, newLog(t), 0xA1)
	var rec = &failingRecorder{FileRecorder: real, armed: make(chan struct{})}
	var s, err = Open(dir, rec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	_ = s.Put([]byte("a"), []byte("1"))
	await(t, s.StartCommit(nil, checkpointAt(1), nil))

	close(rec.armed)
	_ = s.Put([]byte("b"), []byte("2"))
	var op = s.StartCommit(nil, checkpointAt(2), nil)
	<-op.Done()
	if err = op.Err(); err == nil || !strings.Contains(err.Error(), errInjected.Error()) {
		t.Fatalf("commit: got %v, want the injected failure", err)
	}
}

// A failed waitFor future fails the commit, and the store stays at the
// previous checkpoint without the failed transaction's writes.
func TestFailedWaitForKeepsPreviousCheckpoint(t *testing.T) {
	var a = openRecorded(t, newLog(t), 0xA1, Options{})
	defer a.store.Destroy()
	var s = a.store

	_ = s.Put([]byte("a"), []byte("1"))
	var ok = client.NewAsyncOperation()
	ok.Resolve(nil)
	await(t, s.StartCommit(nil, checkpointAt(1), client.OpFutures{ok: {}}))

	_ = s.Put([]byte("b"), []byte("2"))
	var failed = client.NewAsyncOperation()
	var op = s.StartCommit(nil, checkpointAt(2), client.OpFutures{failed: {}, ok: {}})
	failed.Resolve(errors.New("append failed"))
	<-op.Done()
	if err := op.Err(); err == nil || !strings.Contains(err.Error(), "append failed") {
		t.Fatalf("commit: got %v, want the append's failure", err)
	}
	if got := readThrough(t, s); got != 1 {
		t.Fatalf("checkpoint reads through %d, want 1", got)
	}
	if v, err := s.DB().GetBytes(s.ro, []byte("b")); err != nil || v != nil {
		t.Fatalf("failed transaction's write is in the database: %q, %v", v, err)
	}
	if _, _, err := s.Get([]byte("a")); err == nil {
		t.Fatal("Get after a failed commit succeeded")
	}
}

// Reads see the transaction's own writes, scans are ordered and bounded,
// and reserved keys are refused.
func TestKVSemantics(t *testing.T) {
	var a = openRecorded(t, newLog(t), 0xA1, Options{Compression: "zstd"})
	defer a.store.Destroy()
	var s = a.store
	for _, k := range []string{"t1/b", "t1/a", "t2/a", "t1/c", "t0/z"} {
		if err := s.Put([]byte(k), []byte("v"+k)); err != nil {
			t.Fatal(err)
		}
	}
	await(t, s.StartCommit(nil, checkpointAt(1), nil))
	_ = s.Delete([]byte("t1/b"))
	_ = s.Put([]byte("t1/bb"), []byte("new"))

	var keys []string
	if err := s.Scan([]byte("t1/"), []byte("t10"), func(k, v []byte) bool {
		keys = append(keys, string(k))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys, ","); got != "t1/a,t1/bb,t1/c" {
		t.Fatalf("scan of t1/: %s", got)
	}
	keys = nil
	_ = s.Scan(nil, nil, func(k, v []byte) bool { keys = append(keys, string(k)); return len(keys) < 2 })
	if got := strings.Join(keys, ","); got != "t0/z,t1/a" {
		t.Fatalf("stopped scan: %s", got)
	}
	if v, ok, err := s.Get([]byte("t1/bb")); err != nil || !ok || !bytes.Equal(v, []byte("new")) {
		t.Fatalf("Get own write: %q %v %v", v, ok, err)
	}
	if _, ok, _ := s.Get([]byte("t1/b")); ok {
		t.Fatal("own delete not seen")
	}
	if err := s.Put(checkpointKey, []byte("x")); err == nil {
		t.Fatal("Put of a reserved key succeeded")
	}
}

// Get serves committed rows, and keys known absent, from the row cache:
// a write made directly to the database is not seen until the cache is
// dropped. With the cache disabled, it's seen at once.
func TestRowCache(t *testing.T) {
	for _, capacity := range []int64{0, -1} {
		var a = openRecorded(t, newLog(t), 0xA1, Options{RowCacheBytes: capacity})
		var s = a.store
		_ = s.Put([]byte("k"), []byte("committed"))
		await(t, s.StartCommit(nil, checkpointAt(1), nil))
		if _, ok, err := s.Get([]byte("absent")); ok || err != nil {
			t.Fatalf("Get(absent): %v %v", ok, err)
		}
		if v, ok, err := s.Get([]byte("k")); string(v) != "committed" || !ok || err != nil {
			t.Fatalf("Get(k): %q %v %v", v, ok, err)
		}
		var wo = grocksdb.NewDefaultWriteOptions()
		for _, k := range []string{"k", "absent"} {
			if err := s.DB().Put(wo, []byte(k), []byte("direct")); err != nil {
				t.Fatal(err)
			}
		}
		wo.Destroy()
		var want = "committed"
		if capacity < 0 {
			want = "direct"
		}
		if v, _, _ := s.Get([]byte("k")); string(v) != want {
			t.Fatalf("row cache %d: Get(k) after a direct write = %q, want %q", capacity, v, want)
		}
		s.DropRowCache()
		for _, k := range []string{"k", "absent"} {
			if v, ok, _ := s.Get([]byte(k)); string(v) != "direct" || !ok {
				t.Fatalf("row cache %d: Get(%s) after DropRowCache = %q %v", capacity, k, v, ok)
			}
		}
		s.Destroy()
	}
}

// A commit started while the previous one waits: reads, and the row cache,
// see both once they're done.
func TestOverlappingCommits(t *testing.T) {
	var a = openRecorded(t, newLog(t), 0xA1, Options{})
	defer a.store.Destroy()
	var s = a.store
	_ = s.Put([]byte("k"), []byte("v0"))
	await(t, s.StartCommit(nil, checkpointAt(1), nil))
	if v, _, _ := s.Get([]byte("k")); string(v) != "v0" { // Now cached.
		t.Fatalf("Get(k) = %q", v)
	}
	_ = s.Put([]byte("k"), []byte("v1"))
	var gate = client.NewAsyncOperation()
	var first = s.StartCommit(nil, checkpointAt(2), client.OpFutures{gate: {}})
	_ = s.Put([]byte("j"), []byte("x"))
	time.AfterFunc(20*time.Millisecond, func() { gate.Resolve(nil) })
	var second = s.StartCommit(nil, checkpointAt(3), nil)
	await(t, first)
	await(t, second)
	for k, want := range map[string]string{"k": "v1", "j": "x"} {
		if v, ok, err := s.Get([]byte(k)); string(v) != want || !ok || err != nil {
			t.Fatalf("Get(%s) = %q %v %v, want %q", k, v, ok, err, want)
		}
	}
}

// Rows rewritten by transaction after transaction are updated in place in
// the memtable, which holds about one entry a row, not one a write. Scans
// and Gets while each commit is in flight, and a playback, see exactly the
// latest values, whether they shrink (in place) or grow (a new version).
func TestRewritesUpdateInPlace(t *testing.T) {
	var journal = newLog(t)
	var a = openRecorded(t, journal, 0xA1, Options{RowCacheBytes: -1})
	defer a.store.Destroy()
	var s = a.store

	const rows, txns = 200, 60
	var rng = rand.New(rand.NewPCG(5, 6))
	var want = make(map[string]string)
	for i := range txns {
		for r := range rows {
			var k = fmt.Sprintf("row%03d", r)
			var v = fmt.Sprintf("%08d", i) // Same size: in place.
			if i%20 == 19 {
				v = strings.Repeat("v", 1+rng.IntN(16)) // Shrinks or grows.
			}
			if err := s.Put([]byte(k), []byte(v)); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		}
		var op = s.StartCommit(nil, checkpointAt(int64(i)), nil)
		for range 3 { // While the commit may be in flight, and after.
			if got := contents(t, s); !mapsEqual(got, want) {
				t.Fatalf("txn %d: scan differs from the rows written", i)
			}
			var k = fmt.Sprintf("row%03d", rng.IntN(rows))
			if v, ok, err := s.Get([]byte(k)); string(v) != want[k] || !ok || err != nil {
				t.Fatalf("txn %d: Get(%s) = %q %v %v, want %q", i, k, v, ok, err, want[k])
			}
		}
		await(t, op)
	}
	var entries, err = strconv.Atoi(s.DB().GetProperty("rocksdb.num-entries-active-mem-table"))
	if err != nil {
		t.Fatal(err)
	}
	// Each row, its versions that grew, and the checkpoint's: far fewer
	// than the rows*txns writes.
	if entries > 5*rows {
		t.Fatalf("the memtable holds %d entries after %d writes of %d rows", entries, rows*txns, rows)
	}

	var b = openRecorded(t, journal, 0xB2, Options{})
	defer b.store.Destroy()
	if got := contents(t, b.store); !mapsEqual(got, want) {
		t.Fatal("the played-back store differs from the rows written")
	}
	if got := readThrough(t, b.store); got != txns-1 {
		t.Fatalf("played-back checkpoint reads through %d, want %d", got, txns-1)
	}
}

func TestOptionsFromLabels(t *testing.T) {
	var o, err = OptionsFromLabels(pb.MustLabelSet(LabelBlockCacheBytes, "1024", LabelCompression, "zstd", LabelRowCacheBytes, "-1"))
	if err != nil || o.BlockCacheBytes != 1024 || o.Compression != "zstd" || o.RowCacheBytes != -1 {
		t.Fatalf("got %+v, %v", o, err)
	}
	if _, err = OptionsFromLabels(pb.MustLabelSet(LabelCompression, "brotli")); err == nil {
		t.Fatal("unknown compression accepted")
	}
	if _, err = OptionsFromLabels(pb.MustLabelSet(LabelBlockCacheBytes, "lots")); err == nil {
		t.Fatal("bad cache size accepted")
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// testShard is a Shard of a spec, for Opener.
type testShard struct {
	runtime.Shard
	spec *pc.ShardSpec
}

func (s testShard) Spec() *pc.ShardSpec { return s.spec }

// dirRecorder is a FileRecorder which knows its directory.
type dirRecorder struct {
	FileRecorder
	dir string
}

func (r dirRecorder) Dir() string { return r.dir }

// Opener opens a store in the recorder's directory with the shard's labels,
// and refuses a recorder which can't record file operations.
func TestOpener(t *testing.T) {
	var rec, dir = playRecorder(t, newLog(t), 0xA1)
	var shard = testShard{spec: &pc.ShardSpec{
		Id:       "shard/one",
		LabelSet: pb.MustLabelSet(LabelCompression, "snappy"),
	}}
	var st, err = Opener{Options: Options{Compression: "zstd"}}.OpenStore(shard, dirRecorder{rec, dir})
	if err != nil {
		t.Fatal(err)
	}
	var s = st.(*Store)
	defer s.Destroy()
	var files, _ = filepath.Glob(filepath.Join(dir, "OPTIONS-*"))
	if len(files) == 0 {
		t.Fatal("no OPTIONS file")
	} else if b, err := os.ReadFile(files[len(files)-1]); err != nil || !strings.Contains(string(b), "compression=kSnappyCompression") {
		t.Fatalf("OPTIONS lack the labeled compression: %v", err)
	}
	if s.dir != dir {
		t.Fatalf("store in %s, want %s", s.dir, dir)
	}
	shard.spec.LabelSet = pb.MustLabelSet(LabelCompression, "brotli")
	if _, err = (Opener{}).OpenStore(shard, dirRecorder{rec, t.TempDir()}); err == nil {
		t.Fatal("bad compression label accepted")
	}
	if _, err = (Opener{}).OpenStore(shard, plainRecorder(dir)); err == nil || !strings.Contains(err.Error(), "shard/one") {
		t.Fatalf("plain recorder: got %v", err)
	}
}

type plainRecorder string

func (r plainRecorder) Dir() string { return string(r) }
