// Command bench measures gazconsumer against Gazette's own consumer
// framework and against the physical limit, side by side on the same
// journals, and prints the table of docs/benchmarks.md.
//
// It starts one in-process stack (etcd and a Gazette broker, package
// devstack) and fills its input partitions once. Then, -reps times and in a
// rotating order:
//
//   - raw: a process reads and decodes every message of the partitions
//     through the broker client (the limit);
//   - ours: the consumer generated from proto/gazconsumer/bench/v1/sums.proto (command
//     summer: runtime/service, store/rocks) keeps per-key sums in RocksDB
//     over 4 shards; timed from applying its shards until each has read
//     through its partition's write head;
//   - ours-agg: the same command with --summer.aggregate, whose handler sums
//     in memory within a transaction as the anchor does;
//   - anchor: the same consumer hand-written on go.gazette.dev/core/consumer
//     with consumer/store-rocksdb (command anchor), timed the same way.
//
// After every consumer run, the consumer's sums are read back and checked
// against the load's (check.go): a wrong answer fails the run.
//
// For latency (latency.go), the anchor's maximum rate is measured over a
// backlog; then each side consumes a paced live load at fractions of it
// (-latency.rates), and each message's wait from its append's
// acknowledgement to a Stat observing its transaction's commit is reported
// as p50, p99 and p99.9.
//
// For recovery, each side builds a store of -state bytes recorded into a
// log of its own (commands ours-recovery and anchor-recovery); then, -reps
// times, each plays its log back from its hints into a new directory (timed
// until written, then until fsync'd: neither player fsyncs, so each is
// compared with the other, and with a write of as many bytes, at one
// durability), and a process reads each log raw from its start to its write
// head.
//
// With -scaling (scaling.go), throughput and CPU a message are measured as
// the key space grows and as a member's shards grow, and drawn as PNGs to
// -plots.
//
// Every figure comes from its own process, so that the two sides, whose
// RocksDB bindings cannot link into one binary, run alike; the stack runs
// in this one. Ratios are taken within each repetition, then their median
// is reported, which holds up on a noisy machine. Run it with `make bench`;
// `-messages 100000 -state 64MiB -reps 1` is a quick look.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	benchv1 "github.com/gazconsumer/gazconsumer/bench/gen/gazconsumer/bench/v1"
	"github.com/gazconsumer/gazconsumer/bench/internal/benchstate"
	"github.com/gazconsumer/gazconsumer/bench/internal/durable"
	"github.com/gazconsumer/gazconsumer/bench/internal/profile"
	"github.com/gazconsumer/gazconsumer/bench/internal/workload"
	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/specs"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
)

// config is the command's flags.
type config struct {
	bin        string
	dir        string
	workloads  []workloadSpec
	sides      []string          // Consumer sides measured, beside the raw read.
	builds     map[string]string // Sides of -build: other builds of summer, by side.
	reps       int
	state      int64
	valueLen   int
	skip       string
	profileDir string
	timeout    time.Duration
	minTxn     time.Duration
	maxTxn     time.Duration
	latency    latencyConfig
	scaling    scalingConfig
}

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "raw" || os.Args[1] == "rawlog") {
		if err := rawMain(os.Args[1], os.Args[2:]); err != nil {
			fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
		return
	}
	var c config
	var state string
	flag.StringVar(&c.bin, "bin", "", "directory of the commands summer, anchor, ours-recovery and anchor-recovery (default: this command's)")
	flag.StringVar(&c.dir, "dir", "", "work directory of the stack and stores (default: a temporary one, removed after)")
	var custom workloadSpec
	flag.IntVar(&custom.messages, "messages", 1_000_000, "messages of the workload \"custom\"")
	flag.IntVar(&custom.partitions, "partitions", 4, "input partitions, and shards of each consumer, of the workload \"custom\"")
	flag.IntVar(&custom.keys, "keys", 10_000, "distinct keys of the messages of the workload \"custom\"")
	flag.IntVar(&custom.keyLen, "keylen", 0, "bytes of each key of the workload \"custom\" (0: as short as they come, 10); a row of the state is about as long")
	var workloadsFlag = flag.String("workloads", "small,large,wide", "throughput workloads to measure, in order: "+workloadNames()+
		", or custom (set by -messages, -partitions, -keys and -keylen; setting any of those alone measures custom only)")
	var sidesFlag = flag.String("sides", "ours,ours-reflect,anchor", "consumers to measure beside the raw read: ours (the quick start's defaults, with the codecs protoc-gen-gazconsumer generates), ours-reflect (without them: protobuf's reflection, as with codecs=none), ours-agg (aggregating), anchor")
	var buildsFlag = flag.String("build", "", "more sides: NAME=PATH,... runs the summer command at PATH (e.g. a build of another commit) as the side NAME, as ours is run, to compare builds side by side")
	flag.IntVar(&c.reps, "reps", 5, "repetitions of each measure; medians are reported")
	flag.StringVar(&state, "state", "1GiB", "state of the recovery measure's store (e.g. 64MiB, 1GiB)")
	flag.IntVar(&c.valueLen, "value", 1024, "bytes of each value of the recovery measure's store")
	flag.StringVar(&c.skip, "skip", "", "measures to skip: throughput, latency, recovery (e.g. latency,recovery)")
	var latencyWorkload = flag.String("latency.workload", "small", "workload whose keys and partitions the latency measure's load has, and whose messages measure the anchor's maximum rate")
	flag.DurationVar(&c.latency.duration, "latency.duration", 10*time.Second, "load of each latency run")
	flag.DurationVar(&c.latency.warmup, "latency.warmup", time.Second, "first part of each latency run's load, whose messages are not counted")
	var latencyRates = flag.String("latency.rates", "0.1,0.5,0.9", "rates of the latency measure's load, as fractions of the anchor's maximum rate")
	var latencySides = flag.String("latency.sides", "ours,anchor", "consumers of the latency measure")
	flag.BoolVar(&c.scaling.enabled, "scaling", false, "measure the scaling curves too, after the others: throughput and CPU a message as keys and shards grow")
	flag.IntVar(&c.scaling.messages, "scaling.messages", 500_000, "messages of each point of the scaling curves")
	var scalingKeys = flag.String("scaling.keys", "10000,100000,1000000,10000000", "keys of the points of the key sweep")
	flag.IntVar(&c.scaling.partitions, "scaling.partitions", 4, "partitions, and shards, of the key sweep")
	var scalingShards = flag.String("scaling.shards", "1,2,4,8,16", "shards of the points of the shard sweep (one member, a partition a shard)")
	flag.IntVar(&c.scaling.shardKeys, "scaling.shardkeys", 100_000, "keys of the shard sweep")
	var scalingSides = flag.String("scaling.sides", "ours,anchor", "consumers of the scaling curves")
	flag.StringVar(&c.scaling.plots, "plots", "", "directory to draw the scaling curves to, as PNGs (e.g. ../docs)")
	flag.StringVar(&c.profileDir, "profile", "", "directory to write CPU profiles of the consumers and playbacks to (of the last repetition)")
	flag.DurationVar(&c.timeout, "timeout", 3*time.Hour, "limit of the whole run")
	flag.DurationVar(&c.minTxn, "txn.min", 0, "minimum duration of the consumers' transactions")
	flag.DurationVar(&c.maxTxn, "txn.max", time.Second, "maximum duration of the consumers' transactions")
	flag.Parse()
	slog.SetLogLoggerLevel(slog.LevelWarn)

	var err error
	var set = make(map[string]bool)
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if !set["workloads"] && (set["messages"] || set["partitions"] || set["keys"] || set["keylen"]) {
		*workloadsFlag = "custom"
	}
	custom.name = "custom"
	for _, name := range strings.Split(*workloadsFlag, ",") {
		var w, ok = workloadByName(strings.TrimSpace(name), custom)
		if !ok {
			fatal(fmt.Errorf("-workloads: unknown workload %q (want %s or custom)", name, workloadNames()))
		}
		c.workloads = append(c.workloads, w)
	}
	c.builds = make(map[string]string)
	for _, b := range strings.Split(*buildsFlag, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		var name, path, ok = strings.Cut(b, "=")
		if !ok || name == "" || path == "" || slices.Contains(allConsumerSides, name) || name == "raw" {
			fatal(fmt.Errorf("-build %q: want NAME=PATH, NAME not a side of -sides", b))
		}
		if path, err = filepath.Abs(path); err != nil {
			fatal(err)
		}
		c.builds[name] = path
		sideLabels[name] = name + ": " + filepath.Base(path)
	}
	for _, side := range strings.Split(*sidesFlag, ",") {
		if side = strings.TrimSpace(side); !slices.Contains(allConsumerSides, side) {
			fatal(fmt.Errorf("-sides: unknown side %q (want some of %s)", side, strings.Join(allConsumerSides, ", ")))
		}
		c.sides = append(c.sides, side)
	}
	for name := range c.builds {
		c.sides = append(c.sides, name)
	}
	if c.scaling.keys, err = parseInts("scaling.keys", *scalingKeys); err != nil {
		fatal(err)
	}
	if c.scaling.shards, err = parseInts("scaling.shards", *scalingShards); err != nil {
		fatal(err)
	}
	for _, side := range strings.Split(*scalingSides, ",") {
		if side = strings.TrimSpace(side); side != "ours" && side != "anchor" && c.builds[side] == "" {
			fatal(fmt.Errorf("-scaling.sides: unknown side %q (want ours, anchor or a side of -build)", side))
		}
		c.scaling.sides = append(c.scaling.sides, side)
	}
	var ok bool
	if c.latency.workload, ok = workloadByName(*latencyWorkload, custom); !ok {
		fatal(fmt.Errorf("-latency.workload: unknown workload %q (want %s or custom)", *latencyWorkload, workloadNames()))
	}
	for _, f := range strings.Split(*latencyRates, ",") {
		var v, err = strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v <= 0 {
			fatal(fmt.Errorf("-latency.rates: %q is not a positive fraction", f))
		}
		c.latency.fractions = append(c.latency.fractions, v)
	}
	for _, side := range strings.Split(*latencySides, ",") {
		if side = strings.TrimSpace(side); side != "ours" && side != "anchor" && c.builds[side] == "" {
			fatal(fmt.Errorf("-latency.sides: unknown side %q (want ours, anchor or a side of -build)", side))
		}
		c.latency.sides = append(c.latency.sides, side)
	}
	if c.reps < 1 {
		fatal(errors.New("-reps: want at least 1"))
	}
	if c.state, err = benchstate.ParseBytes(state); err != nil || c.state <= 0 {
		fatal(fmt.Errorf("size %q: want a positive size such as 64MiB or 1GiB", state))
	}
	if c.bin == "" {
		var exe, err = os.Executable()
		if err != nil {
			fatal(err)
		}
		c.bin = filepath.Dir(exe)
	}
	var temporary = c.dir == ""
	if temporary {
		if c.dir, err = os.MkdirTemp("", "gazconsumer-bench-"); err != nil {
			fatal(err)
		}
	}
	if c.profileDir != "" {
		if c.profileDir, err = filepath.Abs(c.profileDir); err == nil {
			err = os.MkdirAll(c.profileDir, 0o755)
		}
		if err != nil {
			fatal(err)
		}
	}
	var ctx, cancel = context.WithTimeout(context.Background(), c.timeout)
	err = run(ctx, c)
	cancel()
	if temporary {
		_ = os.RemoveAll(c.dir)
	}
	if err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

// Sides of the consumer measures: ours built as the quick start builds it
// (with the codecs protoc-gen-gazconsumer generates), without them
// (runtime/codec's reflection codec), and aggregating in memory as the
// anchor does; and the anchor. Sides of the recovery measure.
var (
	allConsumerSides = []string{"ours", "ours-reflect", "ours-agg", "anchor"}
	sides            = []string{"ours", "anchor"}
)

// workloadSpec is a throughput workload: messages over keys (each keyLen
// bytes long) in partitions, each consumed by a shard of its own.
type workloadSpec struct {
	name       string
	messages   int
	partitions int
	keys       int
	keyLen     int
	about      string
}

// workloads of the matrix.
var workloads = []workloadSpec{
	{name: "small", messages: 1_000_000, partitions: 4, keys: 10_000,
		about: "small rows, few keys: the state fits every cache"},
	{name: "large", messages: 2_000_000, partitions: 8, keys: 1_000_000,
		about: "small rows, a large key space: most messages meet a key first, or after many others"},
	{name: "wide", messages: 500_000, partitions: 2, keys: 100_000, keyLen: 1000,
		about: "rows of 1 KiB (a key of 1,000 bytes), 50 MiB of state a shard: more than its row cache (32 MiB)"},
}

func workloadNames() string {
	var names []string
	for _, w := range workloads {
		names = append(names, w.name)
	}
	return strings.Join(names, ", ")
}

func workloadByName(name string, custom workloadSpec) (workloadSpec, bool) {
	if name == "custom" {
		return custom, true
	}
	for _, w := range workloads {
		if w.name == name {
			return w, true
		}
	}
	return workloadSpec{}, false
}

func run(ctx context.Context, c config) error {
	fmt.Printf("gazconsumer bench: %d cores; work directory %s\n", runtime.NumCPU(), c.dir)
	var results []matrixRow
	if !strings.Contains(c.skip, "throughput") {
		for _, w := range c.workloads {
			var rows, err = withStack(ctx, c, w.name, w.partitions, c.throughputRuns(), func(env stackEnv) ([]matrixRow, error) {
				return throughput(ctx, c, env, w)
			})
			if err != nil {
				return fmt.Errorf("throughput, workload %s: %w", w.name, err)
			}
			results = append(results, rows...)
		}
		printMatrix(c, results)
	}
	if !strings.Contains(c.skip, "latency") {
		var w = c.latency.workload
		var _, err = withStack(ctx, c, "latency", w.partitions, c.latencyRuns(), func(env stackEnv) ([]matrixRow, error) {
			return nil, latency(ctx, c, env)
		})
		if err != nil {
			return fmt.Errorf("latency, workload %s: %w", w.name, err)
		}
	}
	if !strings.Contains(c.skip, "recovery") {
		var _, err = withStack(ctx, c, "recovery", 1, nil, func(env stackEnv) ([]matrixRow, error) {
			return nil, recovery(ctx, c, env)
		})
		if err != nil {
			return fmt.Errorf("recovery: %w", err)
		}
	}
	if c.scaling.enabled {
		if err := scaling(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// withStack runs fn against a stack of its own, in a directory of c.dir
// named name, whose journals are those of the consumers' runs over
// partitions and of the recovery measure.
func withStack(ctx context.Context, c config, name string, partitions int, runs []workload.Run, fn func(stackEnv) ([]matrixRow, error)) ([]matrixRow, error) {
	// A fixed etcd port: with port 0, the stack's etcd advertises
	// 127.0.0.1:0 as its client URL, which Gazette's consumer adopts when it
	// syncs its endpoints (mainboilerplate.EtcdConfig.MustDial).
	var etcdPort, err = freePort()
	if err != nil {
		return nil, err
	}
	var dir = filepath.Join(c.dir, name)
	stack, err := devstack.Start(ctx, devstack.Options{
		Dir:           filepath.Join(dir, "stack"),
		EtcdPort:      etcdPort,
		UnsafeNoFsync: true,
		LogLevel:      slog.LevelWarn,
	})
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	defer stack.Close()
	// Apply the recovery logs of the runs a few runs at a time: etcd takes
	// at most 128 operations in a transaction.
	var chunk = max(1, (100-partitions)/partitions)
	var yaml = workload.JournalsYAML(partitions, runs[:min(chunk, len(runs))], sides)
	for {
		if _, err = specs.ApplyJournals(ctx, stack.Journals(), "bench journals", []byte(yaml)); err != nil {
			return nil, err
		}
		if runs = runs[min(chunk, len(runs)):]; len(runs) == 0 {
			break
		}
		yaml = workload.RecoveryLogsYAML(partitions, runs[:min(chunk, len(runs))])
	}
	return fn(stackEnv{
		etcd:      stack.EtcdURL(),
		broker:    string(stack.Brokers()[0].Endpoint()),
		jc:        stack.Journals(),
		dir:       dir,
		fragments: stack.FragmentsRoot(),
	})
}

// throughputRuns are the consumer runs of a throughput workload: each side
// in each repetition.
func (c config) throughputRuns() []workload.Run {
	var runs []workload.Run
	for rep := range c.reps {
		for _, side := range c.sides {
			runs = append(runs, workload.Run{Side: side, Rep: rep + 1})
		}
	}
	return runs
}

// stackEnv is how commands reach the stack.
type stackEnv struct {
	etcd, broker string
	jc           pb.RoutedJournalClient
	dir          string // Work directory of the stack's measures.
	fragments    string // Root of the stack's file:// fragment store.
}

// sample is one measure of one repetition.
type sample struct {
	seconds    float64 // Wall time.
	cpuSeconds float64 // User and system time of the measured process.
	startup    float64 // Consumers: seconds until every shard was primary.
	syncSecs   float64 // Playbacks and the write: seconds to fsync after.
	checked    int     // Consumers: keys whose sums were checked.
	checkSecs  float64 // Consumers: seconds to read and check them (untimed).
}

// matrixRow is the summary of one of ours' sides on one workload, against
// the anchor and the raw read: medians over repetitions of ratios taken
// within each, with their ranges.
type matrixRow struct {
	workload, side        string
	rate                  float64 // Messages a second.
	cpuPerM               float64 // CPU seconds a million messages.
	rateVsAnchor          spread  // Ours' msgs/s over the anchor's.
	cpuVsAnchor, cpuVsRaw spread  // Ours' CPU a message over theirs.
	rateVsRaw             spread
	defaultWorkload       bool // Whose CPU against the raw read has a goal.
	vsAnchor              bool // The anchor ran: rateVsAnchor and cpuVsAnchor are set.
}

// spread is a median with the least and greatest values it is of.
type spread struct{ median, lo, hi float64 }

func (s spread) String() string { return fmt.Sprintf("%5.2f (%.2f-%.2f)", s.median, s.lo, s.hi) }

func spreadOf(v []float64) spread {
	if len(v) == 0 {
		return spread{}
	}
	return spread{medianOf(v), slices.Min(v), slices.Max(v)}
}

// ratios are f(num)/f(den) of each repetition.
func ratios(num, den []sample, f func(sample) float64) []float64 {
	var v = make([]float64, min(len(num), len(den)))
	for i := range v {
		v[i] = f(num[i]) / f(den[i])
	}
	return v
}

// Goals of issue 32, for every workload and ours' defaults.
const (
	goalRateVsAnchor = 2.0 // Msgs/s, ours over the anchor: at least.
	goalCPUVsAnchor  = 0.5 // CPU a message, ours over the anchor: at most.
	goalCPUVsRaw     = 2.5 // CPU a message, ours over the raw read, default workload: at most.

	goalRecoveryVsAnchor = 0.3 // Playback time, ours over the anchor's: at most.
	goalRecoveryVsWrite  = 1.5 // Playback time over a write of the live bytes: at most.
	goalRecoveryRead     = 1.2 // Bytes read by playback over live bytes: at most.
)

var sideLabels = map[string]string{
	"raw":          "raw read+decode (the limit)",
	"anchor":       "anchor: Gazette consumer+rocksdb",
	"ours":         "ours: defaults",
	"ours-reflect": "ours-reflect: codecs=none",
	"ours-agg":     "ours-agg: aggregating",
}

func throughput(ctx context.Context, c config, env stackEnv, w workloadSpec) ([]matrixRow, error) {
	fmt.Printf("\nworkload %s: filling %d partitions with %d messages over %d keys (%s)...\n", w.name, w.partitions, w.messages, w.keys, w.about)
	var began = time.Now()
	heads, want, err := fill(ctx, env.jc, w)
	if err != nil {
		return nil, err
	}
	var totalBytes int64
	for _, h := range heads {
		totalBytes += h
	}
	fmt.Printf("  filled in %s: %.1f MB, %.1f bytes a message with framing\n",
		time.Since(began).Round(time.Millisecond), float64(totalBytes)/1e6, float64(totalBytes)/float64(w.messages))

	var measures = append([]string{"raw"}, c.sides...)
	var got = make(map[string][]sample)
	for rep := 1; rep <= c.reps; rep++ {
		for k := range measures {
			var m = measures[(k+rep-1)%len(measures)]
			var s sample
			var err error
			var prof = c.profile(rep, w.name+"-"+m+"-consume.pprof")
			// Each measure starts with no dirty pages of what ran before it
			// (the fill's journals, the last run's stores and logs), whose
			// writeback the kernel would otherwise charge in part to its
			// writes. (It doesn't make the first consumer after a fill of a
			// GB as cheap as the same consumer later: up to a quarter dearer,
			// with or without it. Medians of repetitions stand.)
			syscall.Sync()
			if m == "raw" {
				s, err = rawRead(ctx, env, w, heads, want, prof)
			} else {
				s, err = consume(ctx, c, env, workload.Run{Side: m, Rep: rep, MinTxn: c.minTxn, MaxTxn: c.maxTxn}, w.name, heads, want, prof)
			}
			if err != nil {
				return nil, fmt.Errorf("%s, repetition %d: %w", m, rep, err)
			}
			var checked = "total checked"
			if m != "raw" {
				checked = fmt.Sprintf("%d sums checked in %.1fs", s.checked, s.checkSecs)
			}
			fmt.Printf("  rep %d %-8s %8.3fs  %10.0f msgs/s  cpu %6.2fs  %s\n", rep, m, s.seconds, float64(w.messages)/s.seconds, s.cpuSeconds, checked)
			got[m] = append(got[m], s)
		}
	}

	var perM = float64(w.messages) / 1e6
	fmt.Printf("\nthroughput, workload %s: %d messages (%.1f MB) in %d partitions, %d keys of %d bytes; median of %d (range)\n",
		w.name, w.messages, float64(totalBytes)/1e6, w.partitions, w.keys, keyLenOf(w), c.reps)
	fmt.Printf("  %-34s %11s %8s %9s %10s %9s %17s\n", "", "msgs/s", "MB/s", "time", "start-up", "cpu", "cpu s/M msgs")
	for _, m := range measures {
		var secs = median(got[m], seconds)
		var startup = "-"
		if m != "raw" {
			startup = fmt.Sprintf("%.2fs", median(got[m], func(s sample) float64 { return s.startup }))
		}
		var cpu = spreadOf(sampleValues(got[m], cpuSeconds))
		fmt.Printf("  %-34s %11.0f %8.1f %8.2fs %10s %8.2fs %17s\n", sideLabels[m], float64(w.messages)/secs,
			float64(totalBytes)/1e6/secs, secs, startup, cpu.median, spread{cpu.median / perM, cpu.lo / perM, cpu.hi / perM})
	}
	// Rates are inverse to times: ours/anchor rate = anchor time / ours time.
	var rows []matrixRow
	for _, m := range c.sides {
		if m == "anchor" {
			continue
		}
		var r = matrixRow{
			workload: w.name, side: m, defaultWorkload: w.name == "small",
			rate:      float64(w.messages) / median(got[m], seconds),
			cpuPerM:   median(got[m], cpuSeconds) / perM,
			rateVsRaw: spreadOf(ratios(got["raw"], got[m], seconds)),
			cpuVsRaw:  spreadOf(ratios(got[m], got["raw"], cpuSeconds)),
		}
		fmt.Printf("  %-12s msgs/s against raw: %s", m, r.rateVsRaw)
		if slices.Contains(c.sides, "anchor") {
			r.vsAnchor = true
			r.rateVsAnchor = spreadOf(ratios(got["anchor"], got[m], seconds))
			r.cpuVsAnchor = spreadOf(ratios(got[m], got["anchor"], cpuSeconds))
			fmt.Printf(", against the anchor: %s (goal ≥ %.1f); cpu a msg against the anchor: %s (goal ≤ %.1f)",
				r.rateVsAnchor, goalRateVsAnchor, r.cpuVsAnchor, goalCPUVsAnchor)
		}
		fmt.Printf("; cpu a msg against raw: %s\n", r.cpuVsRaw)
		rows = append(rows, r)
	}
	if slices.Contains(c.sides, "anchor") {
		fmt.Printf("  anchor       msgs/s against raw: %s; cpu a msg against raw: %s\n",
			spreadOf(ratios(got["raw"], got["anchor"], seconds)), spreadOf(ratios(got["anchor"], got["raw"], cpuSeconds)))
	}
	return rows, nil
}

// printMatrix prints the summary of every workload, against the goals.
func printMatrix(c config, rows []matrixRow) {
	fmt.Printf("\nmatrix: medians of %d repetitions (range); ratios taken within each repetition\n", c.reps)
	fmt.Printf("  %-8s %-12s %9s %8s %21s %21s %21s %21s\n", "workload", "side", "msgs/s", "cpu s/M",
		"msgs/s ours/anchor", "cpu ours/anchor", "msgs/s ours/raw", "cpu ours/raw")
	var mark = func(ok bool) string {
		if ok {
			return " "
		}
		return "!"
	}
	for _, r := range rows {
		// Without the anchor, its columns say so rather than 0.00.
		var rateVsAnchor, cpuVsAnchor = fmt.Sprintf("%20s ", "-"), fmt.Sprintf("%20s ", "-")
		if r.vsAnchor {
			rateVsAnchor = fmt.Sprintf("%20s%s", r.rateVsAnchor, mark(r.rateVsAnchor.median >= goalRateVsAnchor))
			cpuVsAnchor = fmt.Sprintf("%20s%s", r.cpuVsAnchor, mark(r.cpuVsAnchor.median <= goalCPUVsAnchor))
		}
		fmt.Printf("  %-8s %-12s %9.0f %8.2f %s %s %20s  %20s%s\n", r.workload, r.side, r.rate, r.cpuPerM,
			rateVsAnchor, cpuVsAnchor, r.rateVsRaw, r.cpuVsRaw, mark(!r.defaultWorkload || r.cpuVsRaw.median <= goalCPUVsRaw))
	}
	fmt.Printf("  goals: msgs/s ours/anchor ≥ %.1f, cpu ours/anchor ≤ %.1f, cpu ours/raw ≤ %.1f (workload small); ! marks a median which misses its goal\n",
		goalRateVsAnchor, goalCPUVsAnchor, goalCPUVsRaw)
}

func sampleValues(samples []sample, f func(sample) float64) []float64 {
	var v = make([]float64, len(samples))
	for i, s := range samples {
		v[i] = f(s)
	}
	return v
}

func seconds(s sample) float64    { return s.seconds }
func cpuSeconds(s sample) float64 { return s.cpuSeconds }

// syncSeconds is the time of a playback's or the write's fsync, and
// durableSeconds its time until its output is durable.
func syncSeconds(s sample) float64    { return s.syncSecs }
func durableSeconds(s sample) float64 { return s.seconds + s.syncSecs }

// profile is the path of a CPU profile of rep, if profiles are asked for
// and rep is the last repetition.
func (c config) profile(rep int, name string) string {
	if c.profileDir == "" || rep != c.reps {
		return ""
	}
	return filepath.Join(c.profileDir, name)
}

// keyLenOf is the length of the keys of w.
func keyLenOf(w workloadSpec) int { return len(keyOf(0, w.keyLen)) }

// keyOf is key k of a workload whose keys are keyLen bytes long (or as
// short as they come): "key-NNNNNN", then as many pseudo-random letters and
// digits as it takes, which neither side's compression can do much with.
func keyOf(k, keyLen int) string {
	var b = fmt.Appendf(nil, "key-%06d", k)
	if len(b) < keyLen {
		const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
		var rng = rand.New(rand.NewPCG(uint64(k), 7))
		b = append(b, '-')
		for len(b) < keyLen {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
	}
	return string(b)
}

// fill publishes w's messages: Adds of its keys over the partitions (key k
// to partition k mod partitions), committed, and returns the partitions'
// write heads and the sum of each key, which every consumer must compute.
func fill(ctx context.Context, jc pb.RoutedJournalClient, c workloadSpec) ([]int64, map[string]int64, error) {
	var pub = message.NewPublisher(client.NewAppendService(ctx, jc), nil)
	var keys = make([]string, c.keys)
	for k := range keys {
		keys[k] = keyOf(k, c.keyLen)
	}
	var rng = rand.New(rand.NewPCG(1, 2))
	var last = make([]*client.AsyncAppend, c.partitions)
	var sums = make(map[string]int64, min(c.keys, c.messages))
	var msg benchv1.Add
	for range c.messages {
		var k = rng.IntN(c.keys)
		var journal = workload.Input(k % c.partitions)
		msg.Key, msg.Value = keys[k], rng.Int64N(1000)
		var aa, err = pub.PublishCommitted(func(message.Mappable) (pb.Journal, string, error) {
			return journal, workload.ContentType, nil
		}, &msg)
		if err != nil {
			return nil, nil, fmt.Errorf("publishing to %s: %w", journal, err)
		}
		sums[msg.Key] += msg.Value
		last[k%c.partitions] = aa
	}
	var heads = make([]int64, c.partitions)
	for i, aa := range last {
		if aa == nil {
			return nil, nil, fmt.Errorf("no message was published to %s", workload.Input(i))
		} else if err := aa.Err(); err != nil {
			return nil, nil, fmt.Errorf("appending to %s: %w", workload.Input(i), err)
		}
		heads[i] = aa.Response().Commit.End
	}
	return heads, sums, nil
}

// rawRead reads and decodes the partitions in a process of its own, and
// checks the messages it decoded against want, the sums of the workload.
func rawRead(ctx context.Context, env stackEnv, c workloadSpec, heads []int64, want map[string]int64, prof string) (sample, error) {
	var args = []string{"raw", "-broker", env.broker}
	for i, h := range heads {
		args = append(args, "-journal", fmt.Sprintf("%s=%d", workload.Input(i), h))
	}
	var exe, err = os.Executable()
	if err != nil {
		return sample{}, err
	}
	var res rawResult
	ps, err := runJSON(ctx, exec.CommandContext(ctx, exe, args...), prof, &res)
	if err != nil {
		return sample{}, err
	} else if err = checkTotal(c.name, res, want, c.messages); err != nil {
		return sample{}, err
	}
	return sample{seconds: res.Seconds, cpuSeconds: cpuOf(ps)}, nil
}

// consume runs a consumer of side in a process of its own, applies its
// shards and times them until they have read through heads; then it checks
// that the consumer's sums are want, those of workload wname.
func consume(ctx context.Context, c config, env stackEnv, r workload.Run, wname string, heads []int64, want map[string]int64, prof string) (_ sample, err error) {
	m, err := startMember(ctx, c, env, r, prof)
	if err != nil {
		return sample{}, err
	}
	defer func() {
		if err != nil {
			m.fail()
		}
		m.close()
		// The run's recovery logs, which no later run reads: a workload's
		// runs would otherwise keep them all on disk until its last
		// (gigabytes a run, for rows of a kilobyte), in the fragment store
		// and in the stack's append log, which keeps every append to a
		// journal until the journal's content is persisted or the journal
		// deleted. A fragment the broker persists after this may remain: at
		// most one a log.
		if rmErr := deleteRecoveryLogs(ctx, env, r, len(heads)); rmErr != nil && err == nil {
			err = rmErr
		}
	}()

	// Apply its shards and time them.
	var began = time.Now()
	if err = m.apply(ctx, len(heads)); err != nil {
		return sample{}, err
	}
	var primary = make(chan time.Duration, 1)
	var watchCtx, stopWatch = context.WithCancel(ctx)
	defer stopWatch()
	go watchPrimaries(watchCtx, m.sc, len(heads), began, primary)
	if err = m.waitReadThrough(ctx, heads); err != nil {
		return sample{}, err
	}
	var s = sample{seconds: time.Since(began).Seconds()}
	stopWatch()
	s.startup = (<-primary).Seconds()
	if prof != "" {
		// With the profile, the consumer's metrics: transactions and the
		// like, to tell where the time went.
		// Gazette's consumers serve them at /debug/metrics, ours at /metrics.
		var path = "/metrics"
		if r.Side == "anchor" {
			path = "/debug/metrics"
		}
		if err = saveMetrics(ctx, "http://127.0.0.1:"+m.port+path, strings.TrimSuffix(prof, ".pprof")+".metrics"); err != nil {
			return s, err
		}
	}
	// Check its answer: every shard has committed through its head. The
	// CPU the consumer spends answering is not the measure's.
	var checkCPU float64
	if s.checked, s.checkSecs, checkCPU, err = m.check(ctx, wname, len(heads), want); err != nil {
		return s, err
	}
	cpu, err := m.stop(ctx, len(heads))
	if err != nil {
		return s, err
	}
	s.cpuSeconds = cpu - checkCPU
	return s, nil
}

// deleteRecoveryLogs deletes the recovery logs of the n shards of run r, and
// removes their fragments.
func deleteRecoveryLogs(ctx context.Context, env stackEnv, r workload.Run, n int) error {
	var req = &pb.ApplyRequest{}
	for i := range n {
		req.Changes = append(req.Changes, pb.ApplyRequest_Change{
			Delete:            pb.Journal(r.ShardSpec(i).RecoveryLogPrefix + "/" + workload.ShardID(i).String()),
			ExpectModRevision: -1,
		})
	}
	if _, err := client.ApplyJournals(ctx, env.jc, req); err != nil {
		return fmt.Errorf("deleting the recovery logs of %s: %w", r, err)
	}
	if err := os.RemoveAll(filepath.Join(env.fragments, r.ShardSpec(0).RecoveryLogPrefix)); err != nil {
		return fmt.Errorf("removing the recovery logs of %s: %w", r, err)
	}
	return nil
}

// check reads the member's sums of its n shards and checks them against
// want, the sums of workload wname. It returns the keys checked, and the
// wall and CPU seconds the member took.
func (m *member) check(ctx context.Context, wname string, n int, want map[string]int64) (keys int, secs, cpu float64, _ error) {
	var cpuBefore, err = procCPU(m.cmd.Process.Pid)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("the CPU time of %s: %w", m.r, err)
	}
	var began = time.Now()
	got, err := readSums(ctx, m.r.Side, m.conn, m.port, n)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("reading the sums of %s: %w", m.r, err)
	} else if err = checkSums(m.r.Side, wname, want, got); err != nil {
		return 0, 0, 0, err
	}
	secs = time.Since(began).Seconds()
	cpuAfter, err := procCPU(m.cmd.Process.Pid)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("the CPU time of %s: %w", m.r, err)
	}
	return len(got), secs, cpuAfter - cpuBefore, nil
}

// saveMetrics writes the Prometheus metrics served at url to path.
func saveMetrics(ctx context.Context, url, path string) error {
	var req, err = http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetching metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching metrics from %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err = io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// watchPrimaries sends how long after began every one of n shards was
// listed as primary, or zero if ctx ends first.
func watchPrimaries(ctx context.Context, sc pc.ShardClient, n int, began time.Time, out chan<- time.Duration) {
	for {
		if resp, err := sc.List(ctx, &pc.ListRequest{}); err == nil {
			var primaries int
			for _, s := range resp.Shards {
				if s.Route.Primary != -1 && s.Status[s.Route.Primary].Code == pc.ReplicaStatus_PRIMARY {
					primaries++
				}
			}
			if primaries == n {
				out <- time.Since(began)
				return
			}
		}
		select {
		case <-ctx.Done():
			out <- 0
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// errExited is the error of a wait for a consumer which exited.
var errExited = errors.New("the consumer exited")

// waitReadThrough waits until shard's primary has committed its reads of
// journal through offset.
func waitReadThrough(ctx context.Context, sc pc.ShardClient, shard pc.ShardID, journal pb.Journal, offset int64, exited <-chan error) error {
	for {
		var resp, err = sc.Stat(ctx, &pc.StatRequest{Shard: shard, ReadThrough: pb.Offsets{journal: offset}})
		if err == nil && resp.Status == pc.Status_OK {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("%w while shard %s read %s: %v", errExited, shard, journal, err)
		case <-ctx.Done():
			return fmt.Errorf("shard %s did not read %s through %d: %w", shard, journal, offset, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func recovery(ctx context.Context, c config, env stackEnv) error {
	var st = benchstate.State{Keys: int(c.state / int64(c.valueLen)), ValueLen: c.valueLen, TxnLen: 1000, Rewrites: 0.25}
	var stateArgs = []string{"-keys", strconv.Itoa(st.Keys), "-value", strconv.Itoa(st.ValueLen),
		"-txn", strconv.Itoa(st.TxnLen), "-rewrites", strconv.FormatFloat(st.Rewrites, 'g', -1, 64)}
	var cmdOf = map[string]string{"ours": "ours-recovery", "anchor": "anchor-recovery"}
	var hintsOf = func(side string) string { return filepath.Join(env.dir, side+".hints") }

	fmt.Printf("\nrecovery: building %d keys of %d bytes (%.0f MiB) in each side's store...\n",
		st.Keys, st.ValueLen, float64(int64(st.Keys)*int64(st.ValueLen))/(1<<20))
	var built = make(map[string]workload.Built)
	for _, side := range sides {
		var dir = filepath.Join(env.dir, side+"-built")
		var b workload.Built
		var cmd = exec.CommandContext(ctx, filepath.Join(c.bin, cmdOf[side]), append([]string{"build",
			"-broker", env.broker, "-log", workload.StateLog(side).String(), "-dir", dir, "-hints", hintsOf(side)}, stateArgs...)...)
		if _, err := runJSON(ctx, cmd, "", &b); err != nil {
			return fmt.Errorf("building %s's store: %w", side, err)
		}
		_ = os.RemoveAll(dir)
		built[side] = b
		fmt.Printf("  %-6s built in %6.1fs: live files %6.0f MiB, log %6.0f MiB\n", side, b.Seconds,
			float64(b.LiveBytes)/(1<<20), float64(b.LogBytes)/(1<<20))
	}

	// write: the driver writes as many bytes as our store's live files to
	// one file of the same disk, timed until its writes return (in the page
	// cache) and until it and its directory are fsync'd.
	var measures = []string{"ours", "anchor", "raw-ours", "raw-anchor", "write"}
	var got = make(map[string][]sample)
	var read = make(map[string]int64)
	for rep := 1; rep <= c.reps; rep++ {
		for k := range measures {
			var m = measures[(k+rep-1)%len(measures)]
			var s sample
			var err error
			var prof = c.profile(rep, m+"-playback.pprof")
			if m == "write" {
				var write, sync time.Duration
				write, sync, err = durable.WriteFile(filepath.Join(env.dir, "write"), built["ours"].LiveBytes)
				s = sample{seconds: write.Seconds(), syncSecs: sync.Seconds()}
				if rerr := os.Remove(filepath.Join(env.dir, "write")); err == nil {
					err = rerr
				}
			} else if side, ok := strings.CutPrefix(m, "raw-"); ok {
				var res rawResult
				var exe, _ = os.Executable()
				var ps *os.ProcessState
				ps, err = runJSON(ctx, exec.CommandContext(ctx, exe, "rawlog", "-broker", env.broker,
					"-journal", fmt.Sprintf("%s=%d", workload.StateLog(side), built[side].LogBytes)), prof, &res)
				s = sample{seconds: res.Seconds, cpuSeconds: cpuOf(ps)}
				read[m] = res.Bytes
			} else {
				var p workload.Played
				// Every playback is checked (untimed): the played store
				// holds every key with its value.
				var args = []string{"play", "-broker", env.broker, "-log", workload.StateLog(m).String(),
					"-dir", filepath.Join(env.dir, m+"-played"), "-hints", hintsOf(m), "-check"}
				var ps *os.ProcessState
				ps, err = runJSON(ctx, exec.CommandContext(ctx, filepath.Join(c.bin, cmdOf[m]), append(args, stateArgs...)...), prof, &p)
				if err == nil && !p.Checked {
					err = errors.New("the played store was not checked")
				}
				s = sample{seconds: p.Seconds, syncSecs: p.SyncSeconds, cpuSeconds: cpuOf(ps)}
				read[m] = p.BytesRead
			}
			if err != nil {
				return fmt.Errorf("%s, repetition %d: %w", m, rep, err)
			}
			var synced string
			if !strings.HasPrefix(m, "raw-") {
				synced = fmt.Sprintf(", then fsync %.2fs", s.syncSecs)
			}
			fmt.Printf("  rep %d %-10s %8.2fs%s\n", rep, m, s.seconds, synced)
			got[m] = append(got[m], s)
		}
	}

	fmt.Printf("\nrecovery: a store of %d keys of %d bytes (%.0f MiB), played from its hints; median of %d (range)\n",
		st.Keys, st.ValueLen, float64(int64(st.Keys)*int64(st.ValueLen))/(1<<20), c.reps)
	fmt.Printf("  %-34s %9s %9s %9s %9s %9s %9s %8s\n", "", "live MiB", "log MiB", "read MiB", "time", "fsync", "durable", "MB/s")
	var mib = func(n int64) string {
		if n < 0 {
			return "-"
		}
		return fmt.Sprintf("%.0f", float64(n)/(1<<20))
	}
	for _, row := range []struct{ m, side, label string }{
		{"raw-anchor", "anchor", "raw read of the anchor's log"},
		{"anchor", "anchor", "anchor: Gazette playback"},
		{"raw-ours", "ours", "raw read of our log"},
		{"ours", "ours", "ours: gazconsumer playback"},
		{"write", "ours", "write of our live bytes"},
	} {
		var secs = median(got[row.m], seconds)
		var b = built[row.side]
		var live, logBytes, readBytes = mib(b.LiveBytes), mib(b.LogBytes), mib(read[row.m])
		var rate = float64(b.LiveBytes) / 1e6 / secs
		var synced, durableSecs = "-", "-"
		switch {
		case strings.HasPrefix(row.m, "raw-"):
			live, rate = "-", float64(read[row.m])/1e6/secs
		case row.m == "write":
			logBytes, readBytes = "-", "-"
		}
		if !strings.HasPrefix(row.m, "raw-") {
			synced = fmt.Sprintf("%.2fs", median(got[row.m], syncSeconds))
			durableSecs = fmt.Sprintf("%.2fs", median(got[row.m], durableSeconds))
		}
		fmt.Printf("  %-34s %9s %9s %9s %8.2fs %9s %9s %8.0f\n", row.label, live, logBytes, readBytes, secs, synced, durableSecs, rate)
	}
	fmt.Printf("  (time: until the player's files are written, in the page cache, as neither player fsyncs;\n" +
		"   durable: and then fsync'd, files and directories; MB/s: of the log read, for raw reads; of live state, else)\n")
	fmt.Printf("  like for like: each ratio compares outputs of one durability, fsync'd on both sides or on neither\n")
	var mark = func(v spread, goal float64) string {
		if v.median <= goal {
			return fmt.Sprintf("(goal ≤ %.1f)", goal)
		}
		return fmt.Sprintf("(goal ≤ %.1f: missed)", goal)
	}
	for _, mode := range []struct {
		label string
		f     func(sample) float64
	}{{"both fsync", durableSeconds}, {"neither fsyncs", seconds}} {
		var vsAnchor = spreadOf(ratios(got["ours"], got["anchor"], mode.f))
		var vsWrite = spreadOf(ratios(got["ours"], got["write"], mode.f))
		fmt.Printf("  %-15s ours/anchor (playback time):       %s %s\n", mode.label+":", vsAnchor, mark(vsAnchor, goalRecoveryVsAnchor))
		fmt.Printf("  %-15s ours/write of its live bytes:      %s %s\n", mode.label+":", vsWrite, mark(vsWrite, goalRecoveryVsWrite))
	}
	fmt.Printf("  ours/raw read of our log (time):                  %s\n", spreadOf(ratios(got["ours"], got["raw-ours"], seconds)))
	fmt.Printf("  anchor/raw read of its log (time):                %s\n", spreadOf(ratios(got["anchor"], got["raw-anchor"], seconds)))
	for _, side := range sides {
		var ratio = float64(read[side]) / float64(built[side].LiveBytes)
		var goal string
		if side == "ours" {
			goal = fmt.Sprintf(" (goal ≤ %.1f)", goalRecoveryRead)
		}
		fmt.Printf("  %-6s read by playback / live bytes:           %5.2f%s\n", side, ratio, goal)
	}
	return nil
}

// runJSON runs cmd, with a CPU profile to prof if set, and decodes the
// last line of its output into v.
func runJSON(ctx context.Context, cmd *exec.Cmd, prof string, v any) (*os.ProcessState, error) {
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if prof != "" {
		cmd.Env = append(os.Environ(), profile.Env+"="+prof)
	}
	if err := cmd.Run(); err != nil {
		return cmd.ProcessState, fmt.Errorf("%s: %w", strings.Join(cmd.Args, " "), err)
	}
	var lines = bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], v); err != nil {
		return cmd.ProcessState, fmt.Errorf("%s printed %q: %w", cmd.Args[0], out.String(), err)
	}
	return cmd.ProcessState, ctx.Err()
}

func cpuOf(ps *os.ProcessState) float64 {
	if ps == nil {
		return 0
	}
	return (ps.UserTime() + ps.SystemTime()).Seconds()
}

// procCPU is the user and system time of process pid so far, in seconds,
// from /proc/PID/stat (fields utime and stime, in ticks of USER_HZ, 100 a
// second on Linux).
func procCPU(pid int) (float64, error) {
	var b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields follow the command's name, in parentheses, which may hold
	// spaces: state is the first after its last ')'.
	var i = bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name in %q", pid, b)
	}
	var fields = strings.Fields(string(b[i+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name, want at least 13", pid, len(fields))
	}
	// utime and stime are fields 14 and 15 of stat(5); state is field 3.
	utime, err := strconv.ParseInt(fields[14-3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat utime: %w", pid, err)
	}
	stime, err := strconv.ParseInt(fields[15-3], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat stime: %w", pid, err)
	}
	return float64(utime+stime) / 100, nil
}

// tail is the last n bytes of b.
func tail(b []byte, n int) []byte { return b[max(0, len(b)-n):] }

// median of f over samples.
func median(samples []sample, f func(sample) float64) float64 {
	var v = make([]float64, len(samples))
	for i, s := range samples {
		v[i] = f(s)
	}
	return medianOf(v)
}

// medianRatio is the median over repetitions of f(num)/f(den).
func medianRatio(num, den []sample, f func(sample) float64) float64 {
	var v = make([]float64, min(len(num), len(den)))
	for i := range v {
		v[i] = f(num[i]) / f(den[i])
	}
	return medianOf(v)
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// freePort returns a free port of the loopback interface.
func freePort() (int, error) {
	var l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
