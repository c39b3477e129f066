// Command recoverybench measures what recovering a shard's RocksDB store
// from its recovery log costs, against the size of its live state.
//
// It builds a store on the in-process stack as a consumer does: pipelined
// transactions of Puts of distinct keys, recorded into a recovery log. Then
// it plays the log back into a new directory from the store's last hints,
// opens the store, and checks its keys. It prints the live state's bytes,
// the log's, the bytes playback read, and the times of playback and of
// writing the live state's bytes to the same disk with fsync, with the
// ratios the project's goals are about:
//
//	bytes read / live bytes         (goal ≤ 1.2)
//	playback time / fsync'd write   (goal ≤ 1.5)
//
// Run it with `make bench-recovery`, or `go run ./cmd/recoverybench
// -keys 100000` for a quick look.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/gazconsumer/gazconsumer/bench/internal/benchstate"
	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

func main() {
	var (
		keys      = flag.Int("keys", 1_000_000, "distinct keys to write")
		valueLen  = flag.Int("value", 1024, "bytes of each value")
		txnLen    = flag.Int("txn", 1000, "Puts per transaction")
		rewrites  = flag.Float64("rewrites", 0.25, "fraction of further Puts which rewrite existing keys")
		dir       = flag.String("dir", "", "directory for the stack and stores (default: a temporary one, removed after)")
		logLevel  = flag.String("log", "warn", "log level")
		profile   = flag.String("cpuprofile", "", "write a CPU profile of the playback to this file")
		every     = flag.Duration("compact-every", 5*time.Second, "how often log compaction is checked")
		compactAt = flag.Float64("compact-at", recoverylog.DefaultCompaction.Ratio, "ratio of hinted to live bytes past which the log is compacted (0: never)")
	)
	flag.Parse()
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		fatal(err)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))

	if *dir == "" {
		var d, err = os.MkdirTemp("", "recoverybench-")
		if err != nil {
			fatal(err)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	cpuProfile, compactEvery = *profile, *every
	if err := run(context.Background(), *dir, benchstate.State{Keys: *keys, ValueLen: *valueLen, TxnLen: *txnLen, Rewrites: *rewrites}, *compactAt); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "recoverybench:", err)
	os.Exit(1)
}

const journal = pb.Journal("recoverybench/log")

// cpuProfile is the file of the playback's CPU profile, if any, and
// compactEvery how often the store checks its log compaction policy.
var (
	cpuProfile   string
	compactEvery time.Duration
)

func run(ctx context.Context, dir string, st benchstate.State, compactAt float64) error {
	var stack, err = devstacktest.Start(ctx, `
name: recoverybench/log
replication: 1
fragment:
  length: 67108864
  stores: [file:///]
  refresh_interval: 1s
  compression_codec: NONE
`)
	if err != nil {
		return err
	}
	defer stack.Close()
	// Read persisted fragments directly from the store, as players do in
	// production (and Gazette's own players do).
	defer client.InstallFileTransport(stack.FragmentsRoot())()

	// Build the store.
	var built = filepath.Join(dir, "built")
	rec, err := newRecorder(ctx, stack.Journals(), built, 0xB1)
	if err != nil {
		return err
	}
	var opts = rocks.Options{LogCompaction: recoverylog.Compaction{Ratio: compactAt, MinSpan: recoverylog.DefaultCompaction.MinSpan}, LogCompactionInterval: compactEvery}
	if compactAt == 0 {
		opts.LogCompaction.Ratio = -1
	}
	store, err := rocks.Open(built, rec, opts)
	if err != nil {
		return err
	}
	var start = time.Now()
	if err = write(store, st); err != nil {
		return err
	}
	var writeTime = time.Since(start)
	hints, err := rec.Hints(ctx)
	if err != nil {
		return err
	}
	var stats = recoverylog.StatsOf(hints)
	store.Destroy()

	// Recover it.
	var recovered = filepath.Join(dir, "recovered")
	if err = os.MkdirAll(recovered, 0o700); err != nil {
		return err
	}
	if cpuProfile != "" {
		var f, err = os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err = pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	start = time.Now()
	var p = recoverylog.NewPlayer(stack.Journals(), journal, recovered, 0xB2)
	p.DoNotProxy = true
	p.FinishAtWriteHead()
	fsm, err := p.Play(ctx, hints)
	if err != nil {
		return err
	}
	var playTime = time.Since(start)
	if cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	var actx, cancel = context.WithCancel(ctx)
	defer cancel()
	rec2, err := recoverylog.NewRecorder(journal, fsm, 0xB2, recovered, client.NewAppendService(actx, stack.Journals()))
	if err != nil {
		return err
	}
	start = time.Now()
	store, err = rocks.Open(recovered, rec2, opts)
	if err != nil {
		return err
	}
	var openTime = time.Since(start)
	if err = check(store, st); err != nil {
		store.Destroy()
		return err
	}
	store.Destroy()

	// The log's read rate: read the hinted bytes without playing them.
	rawTime, err := readRaw(ctx, stack.Journals(), stats.NeededFrom, hints.NextOffset, stats.HintedBytes)
	if err != nil {
		return err
	}

	// The physical limit: write the live bytes to the same disk, with fsync.
	fsyncTime, err := writeFsync(filepath.Join(dir, "fsync"), stats.LiveBytes)
	if err != nil {
		return err
	}

	fmt.Printf("state: %d keys of %d bytes, written in %v (%.1f MB/s)\n", st.Keys, st.ValueLen, writeTime.Round(time.Millisecond),
		float64(stats.LiveBytes)/writeTime.Seconds()/1e6)
	fmt.Printf("%-34s %12s\n", "", "bytes")
	fmt.Printf("%-34s %12d\n", "live state (files of the hints)", stats.LiveBytes)
	fmt.Printf("%-34s %12d\n", "recovery log", hints.NextOffset)
	fmt.Printf("%-34s %12d\n", "needed span of the log", hints.NextOffset-stats.NeededFrom)
	fmt.Printf("%-34s %12d\n", "hinted segments", stats.HintedBytes)
	fmt.Printf("%-34s %12d\n", "read by playback", p.BytesRead())
	fmt.Printf("%-34s %12s\n", "", "time")
	fmt.Printf("%-34s %12v\n", "playback", playTime.Round(time.Millisecond))
	fmt.Printf("%-34s %12v\n", "open of the played store", openTime.Round(time.Millisecond))
	fmt.Printf("%-34s %12v\n", "raw read of as many log bytes", rawTime.Round(time.Millisecond))
	fmt.Printf("%-34s %12v\n", "write of live bytes with fsync", fsyncTime.Round(time.Millisecond))
	fmt.Printf("ratio bytes read / live bytes:          %.2f (goal ≤ 1.2)\n", float64(p.BytesRead())/float64(stats.LiveBytes))
	fmt.Printf("ratio playback time / fsync'd write:    %.2f (goal ≤ 1.5)\n", playTime.Seconds()/fsyncTime.Seconds())
	fmt.Printf("ratio playback time / raw read:         %.2f\n", playTime.Seconds()/rawTime.Seconds())
	fmt.Printf("ratio recovery log / live bytes:        %.2f\n", float64(hints.NextOffset)/float64(stats.LiveBytes))
	return nil
}

// newRecorder plays the log into dir as author, fencing it, and returns a
// Recorder of dir.
func newRecorder(ctx context.Context, jc pb.RoutedJournalClient, dir string, author recoverylog.Author) (*recoverylog.Recorder, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var p = recoverylog.NewPlayer(jc, journal, dir, author)
	p.FinishAtWriteHead()
	var fsm, err = p.Play(ctx, nil)
	if err != nil {
		return nil, err
	}
	return recoverylog.NewRecorder(journal, fsm, author, dir, client.NewAppendService(ctx, jc))
}

// write puts st into s, in pipelined transactions.
func write(s *rocks.Store, st benchstate.State) error {
	var order = st.Order()
	var k, v []byte
	var prev client.OpFuture
	for i, n := range order {
		if err := s.Put(benchstate.Key(k, n), benchstate.Value(v, n, st.ValueLen)); err != nil {
			return err
		}
		if (i+1)%st.TxnLen != 0 && i != len(order)-1 {
			continue
		}
		if prev != nil {
			if <-prev.Done(); prev.Err() != nil {
				return prev.Err()
			}
		}
		prev = s.StartCommit(nil, pc.Checkpoint{Sources: map[pb.Journal]pc.Checkpoint_Source{
			"recoverybench/input": {ReadThrough: int64(i + 1)},
		}}, nil)
	}
	if <-prev.Done(); prev.Err() != nil {
		return prev.Err()
	}
	return nil
}

// check that s holds every key of st with its value.
func check(s *rocks.Store, st benchstate.State) error {
	var c = st.NewChecker()
	if err := s.Scan(nil, nil, c.Next); err != nil {
		return err
	}
	return c.Err()
}

// readRaw reads n bytes of the log from offset from (or through end), and
// discards them.
func readRaw(ctx context.Context, jc pb.RoutedJournalClient, from, end, n int64) (time.Duration, error) {
	var start = time.Now()
	var rr = client.NewRetryReader(ctx, jc, pb.ReadRequest{Journal: journal, Offset: from, EndOffset: min(end, from+n), DoNotProxy: true})
	defer rr.Cancel()
	if _, err := io.Copy(io.Discard, rr); err != nil && err != io.EOF {
		return 0, fmt.Errorf("reading %s: %w", journal, err)
	}
	return time.Since(start), nil
}

// writeFsync writes n bytes to a new file at path in 4 MiB writes, fsyncs it
// and its directory, and returns the time taken.
func writeFsync(path string, n int64) (time.Duration, error) {
	var buf = make([]byte, 4<<20)
	for i := range buf {
		buf[i] = byte(i * 31)
	}
	var start = time.Now()
	var f, err = os.Create(path)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	for w := int64(0); w < n; w += int64(len(buf)) {
		if _, err = f.Write(buf[:min(int64(len(buf)), n-w)]); err != nil {
			f.Close()
			return 0, err
		}
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return 0, err
	}
	if err = f.Close(); err != nil {
		return 0, err
	}
	d, err := os.Open(filepath.Dir(path))
	if err == nil {
		err = d.Sync()
		d.Close()
	}
	return time.Since(start), err
}
