// Command recoverybench measures what recovering a shard's RocksDB store
// from its recovery log costs, against the size of its live state.
//
// It builds a store on the in-process stack as a consumer does: pipelined
// transactions of Puts of distinct keys, recorded into a recovery log. Then,
// -reps times, it plays the log back into a new directory from the store's
// last hints, fsyncs the played files, opens the store, and checks its keys;
// and writes as many bytes as the live state's to one file of the same
// disk, then fsyncs it. It prints the live state's bytes, the log's, the
// bytes playback read, and the times of playbacks and writes, each until
// its output is written and until it is fsync'd (the player does not fsync:
// like is compared with like, both fsync'd or neither), medians and ranges,
// with the ratios the project's goals are about:
//
//	bytes read / live bytes                    (goal ≤ 1.2)
//	playback time / write, both fsync'd        (goal ≤ 1.5)
//	playback time / write, neither fsync'd     (goal ≤ 1.5)
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
	"slices"
	"time"

	"github.com/gazconsumer/gazconsumer/bench/internal/benchstate"
	"github.com/gazconsumer/gazconsumer/bench/internal/durable"
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
		repsFlag  = flag.Int("reps", 3, "playbacks and writes to measure; medians and ranges are reported")
		mapFlag   = flag.Bool("map", true, "the player maps the fragment files under the stack's file root (recoverylog.Player's FileRoot), as a member given --broker.file-root does; -map=false reads them through their URLs")
		direct    = flag.Bool("direct", true, "the player reads persisted fragments from the store itself (recoverylog.Player's DoNotProxy), as members do by default; -direct=false reads them through the brokers (and maps none)")
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
	if *repsFlag < 1 {
		fatal(fmt.Errorf("-reps %d: want at least 1", *repsFlag))
	}
	cpuProfile, compactEvery, reps, mapFiles, proxied = *profile, *every, *repsFlag, *mapFlag && *direct, !*direct
	if err := run(context.Background(), *dir, benchstate.State{Keys: *keys, ValueLen: *valueLen, TxnLen: *txnLen, Rewrites: *rewrites}, *compactAt); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "recoverybench:", err)
	os.Exit(1)
}

const journal = pb.Journal("recoverybench/log")

// cpuProfile is the file of the playback's CPU profile, if any;
// compactEvery how often the store checks its log compaction policy; reps
// the playbacks measured; mapFiles whether the player maps the fragment
// files under fileRoot, and proxied whether it reads through the brokers.
var (
	cpuProfile   string
	compactEvery time.Duration
	reps         int
	mapFiles     bool
	proxied      bool
	fileRoot     string // Of the stack's fragment store.
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
	fileRoot = stack.FragmentsRoot()

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

	// Recover it, -reps times, beside writes of as many bytes (in rotating
	// order): each timed until its files are written (the player does not
	// fsync) and until they are fsync'd, so that each ratio compares
	// outputs of one durability.
	var plays, syncs, opens, writes, writeSyncs []float64
	var bytesRead int64
	for rep := range reps {
		var recovered = filepath.Join(dir, fmt.Sprintf("recovered-%d", rep))
		var playFirst = rep%2 == 0
		for k := range 2 {
			if (k == 0) == playFirst {
				var r, err = recoverOnce(ctx, stack.Journals(), hints, recovered, st, rep == reps-1)
				if err != nil {
					return fmt.Errorf("playback %d: %w", rep+1, err)
				}
				plays, syncs, opens = append(plays, r.play.Seconds()), append(syncs, r.sync.Seconds()), append(opens, r.open.Seconds())
				bytesRead = r.bytesRead
				fmt.Printf("  rep %d playback %8.2fs, then fsync %6.2fs\n", rep+1, r.play.Seconds(), r.sync.Seconds())
			} else {
				var w, sync, err = durable.WriteFile(filepath.Join(dir, "write"), stats.LiveBytes)
				if err == nil {
					err = os.Remove(filepath.Join(dir, "write"))
				}
				if err != nil {
					return fmt.Errorf("write %d: %w", rep+1, err)
				}
				writes, writeSyncs = append(writes, w.Seconds()), append(writeSyncs, sync.Seconds())
				fmt.Printf("  rep %d write    %8.2fs, then fsync %6.2fs\n", rep+1, w.Seconds(), sync.Seconds())
			}
		}
	}

	// The log's read rate: read the hinted bytes without playing them.
	rawTime, err := readRaw(ctx, stack.Journals(), stats.NeededFrom, hints.NextOffset, stats.HintedBytes)
	if err != nil {
		return err
	}

	var sum = func(a, b []float64) []float64 {
		var out = make([]float64, len(a))
		for i := range a {
			out[i] = a[i] + b[i]
		}
		return out
	}
	var div = func(a, b []float64) spread {
		var out = make([]float64, len(a))
		for i := range a {
			out[i] = a[i] / b[i]
		}
		return spreadOf(out)
	}
	var durablePlays, durableWrites = sum(plays, syncs), sum(writes, writeSyncs)
	fmt.Printf("state: %d keys of %d bytes, written in %v (%.1f MB/s)\n", st.Keys, st.ValueLen, writeTime.Round(time.Millisecond),
		float64(stats.LiveBytes)/writeTime.Seconds()/1e6)
	fmt.Printf("%-34s %12s\n", "", "bytes")
	fmt.Printf("%-34s %12d\n", "live state (files of the hints)", stats.LiveBytes)
	fmt.Printf("%-34s %12d\n", "recovery log", hints.NextOffset)
	fmt.Printf("%-34s %12d\n", "needed span of the log", hints.NextOffset-stats.NeededFrom)
	fmt.Printf("%-34s %12d\n", "hinted segments", stats.HintedBytes)
	fmt.Printf("%-34s %12d\n", "read by playback", bytesRead)
	fmt.Printf("%-34s %21s (median of %d, range)\n", "", "seconds", reps)
	fmt.Printf("%-34s %21s\n", "playback (into the page cache)", spreadOf(plays))
	fmt.Printf("%-34s %21s\n", "  then fsync of its files", spreadOf(syncs))
	fmt.Printf("%-34s %21s\n", "  durable", spreadOf(durablePlays))
	fmt.Printf("%-34s %21s\n", "open of the played store", spreadOf(opens))
	fmt.Printf("%-34s %21s\n", "write of live bytes", spreadOf(writes))
	fmt.Printf("%-34s %21s\n", "  then fsync", spreadOf(writeSyncs))
	fmt.Printf("%-34s %21s\n", "  durable", spreadOf(durableWrites))
	fmt.Printf("%-34s %12.2f\n", "raw read of as many log bytes", rawTime.Seconds())
	fmt.Printf("ratio bytes read / live bytes:                 %.2f (goal ≤ 1.2)\n", float64(bytesRead)/float64(stats.LiveBytes))
	fmt.Printf("ratio playback / write, both fsync'd:          %s (goal ≤ 1.5)\n", div(durablePlays, durableWrites))
	fmt.Printf("ratio playback / write, neither fsync'd:       %s (goal ≤ 1.5)\n", div(plays, writes))
	fmt.Printf("ratio playback time / raw read:                %.2f\n", medianOf(plays)/rawTime.Seconds())
	fmt.Printf("ratio recovery log / live bytes:               %.2f\n", float64(hints.NextOffset)/float64(stats.LiveBytes))
	return nil
}

// recovered is what one playback measured.
type recovered struct {
	play, sync, open time.Duration
	bytesRead        int64
}

// recoverOnce plays the log from hints into dir, fsyncs the played files,
// opens the store read-only and checks it holds st, then removes it. It writes a
// CPU profile of the playback if profile is set and -cpuprofile is.
func recoverOnce(ctx context.Context, jc pb.RoutedJournalClient, hints *recoverylog.Hints, dir string, st benchstate.State, profile bool) (recovered, error) {
	var r recovered
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return r, err
	}
	defer os.RemoveAll(dir)
	if profile && cpuProfile != "" {
		var f, err = os.Create(cpuProfile)
		if err != nil {
			return r, err
		}
		defer f.Close()
		if err = pprof.StartCPUProfile(f); err != nil {
			return r, err
		}
	}
	var start = time.Now()
	var p = recoverylog.NewPlayer(jc, journal, dir, 0xB2)
	p.DoNotProxy = !proxied
	if mapFiles {
		p.FileRoot = fileRoot
	}
	p.FinishAtWriteHead()
	var _, err = p.Play(ctx, hints)
	if err != nil {
		return r, err
	}
	r.play, r.bytesRead = time.Since(start), p.BytesRead()
	if profile && cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if r.sync, err = durable.SyncTree(dir); err != nil {
		return r, err
	}
	// Opened read-only, with no recorder: a recorder would append to the
	// log, which the next repetition plays again.
	start = time.Now()
	ro, err := rocks.OpenReadOnly(dir)
	if err != nil {
		return r, err
	}
	r.open = time.Since(start)
	defer ro.Close()
	var c = st.NewChecker()
	if err = ro.Scan(nil, nil, c.Next); err != nil {
		return r, err
	}
	return r, c.Err()
}

// spread is a median with the least and greatest values it is of.
type spread struct{ median, lo, hi float64 }

func (s spread) String() string { return fmt.Sprintf("%5.2f (%.2f-%.2f)", s.median, s.lo, s.hi) }

func spreadOf(v []float64) spread {
	return spread{medianOf(v), slices.Min(v), slices.Max(v)}
}

func medianOf(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
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
