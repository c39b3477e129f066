package rocks

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/linxGnu/grocksdb"
	"go.gazette.dev/core/broker/client"
)

// A store whose MANIFEST rolls and whose log is compacted in the background
// while it writes is recovered from its hints, reading about its live bytes,
// with every committed key and its last checkpoint.
func TestRecoveryAfterLogCompactionAndManifestRoll(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var journal = newLog(t)
	var o = Options{
		LogCompaction:         recoverylog.Compaction{Ratio: 1.1, MinSpan: 1},
		LogCompactionInterval: 10 * time.Millisecond,
	}
	smallTune(&o)
	var tune = o.Tune
	o.Tune = func(ro *grocksdb.Options) {
		tune(ro)
		ro.SetMaxManifestFileSize(4 << 10) // Roll often.
	}
	var a = openRecorded(t, journal, 0xA1, o)
	defer a.store.Destroy()
	var manifest = liveManifest(t, ctx, a.rec)

	var rng = rand.New(rand.NewPCG(5, 6))
	var want = make(map[string]string)
	var last client.OpFuture
	var i int
	var compacted, rolled bool
	for ; i < 100 || !compacted || !rolled; i++ {
		if i == 3000 {
			t.Fatalf("after %d transactions, the log compacted: %v, the MANIFEST rolled: %v", i, compacted, rolled)
		}
		for range 20 {
			var k = fmt.Sprintf("k%04d", rng.IntN(1000))
			var v = strings.Repeat(fmt.Sprintf("%d.", i), 20+rng.IntN(40))
			if err := a.store.Put([]byte(k), []byte(v)); err != nil {
				t.Fatal(err)
			}
			want[k] = v
		}
		if last != nil {
			await(t, last)
		}
		last = a.store.StartCommit(nil, checkpointAt(int64(i)), nil)
		if i%20 == 19 {
			var h, err = a.rec.Hints(ctx)
			if err != nil {
				t.Fatal(err)
			}
			compacted = compacted || recoverylog.StatsOf(h).NeededFrom > recoverylog.StatsOf(h).End/2
			rolled = rolled || liveManifest(t, ctx, a.rec) != manifest
		}
	}
	await(t, last)
	t.Logf("%d transactions; MANIFEST %s rolled to %s", i, manifest, liveManifest(t, ctx, a.rec))
	// The log's compaction, in the background, soon has the hints need
	// about the live bytes of the log (hinted segments are merged across
	// gaps of up to 64 KiB, which weigh on a store this small).
	var hints *recoverylog.Hints
	var stats recoverylog.Stats
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if hints, err = a.rec.Hints(ctx); err != nil {
			t.Fatal(err)
		}
		stats = recoverylog.StatsOf(hints)
		if float64(stats.HintedBytes) <= 1.5*float64(stats.LiveBytes)+2*(64<<10) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("after 10s, hints of %d live bytes have %d bytes of the log read", stats.LiveBytes, stats.HintedBytes)
		}
	}

	// Recover from the hints, as a new author.
	var dir = t.TempDir()
	var p = recoverylog.NewPlayer(stack.Journals(), journal, dir, 0xB2)
	p.FinishAtWriteHead()
	fsm, err := p.Play(ctx, hints)
	if err != nil {
		t.Fatal(err)
	}
	// The player reads the hinted segments, and the tail the log's
	// compaction (which goes on in the background) wrote after the hints,
	// through the fence it writes (ops of a few bytes may be read twice, as
	// a read of the tail resumes).
	var tail = fsm.NextOffset() - stats.End + 1<<10
	t.Logf("recovery read %d bytes of the log: %d live bytes in %d hinted segments of %d bytes, and a tail of %d",
		p.BytesRead(), stats.LiveBytes, stats.Segments, stats.HintedBytes, tail)
	if p.BytesRead() > stats.HintedBytes+tail {
		t.Errorf("recovery read %d bytes of the log, past its %d hinted bytes and tail of %d", p.BytesRead(), stats.HintedBytes, tail)
	}
	rec, err := recoverylog.NewRecorder(journal, fsm, 0xB2, dir, client.NewAppendService(ctx, stack.Journals()))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(dir, rec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Destroy()
	if got := readThrough(t, b); got != int64(i-1) {
		t.Fatalf("recovered checkpoint reads through %d, want %d", got, i-1)
	}
	if got := contents(t, b); !mapsEqual(got, want) {
		t.Fatalf("recovered store holds %d keys, want %d", len(got), len(want))
	}
}

// liveManifest returns the name of the store's live MANIFEST.
func liveManifest(t *testing.T, ctx context.Context, rec *recoverylog.Recorder) string {
	t.Helper()
	var h, err = rec.Hints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ln := range h.LiveNodes {
		for _, l := range ln.Links {
			if strings.HasPrefix(l, "MANIFEST-") {
				return l
			}
		}
	}
	t.Fatal("no live MANIFEST")
	return ""
}
