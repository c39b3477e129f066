// Command querybench measures live queries of a consumer's tables
// (runtime/query) while the consumer consumes at full speed, beside the
// consumer benchmark (cmd/bench), and prints:
//
//   - the latency of point GETs (SummerQueries.GetSum of a random key,
//     routed by its partition key to its shard), p50, p99 and p99.9, and
//     how many were answered a second, by -getters concurrent callers;
//   - the throughput of SCANs (SummerQueries.ListSums, pages of -page rows
//     merged across every shard, by -scanners callers), in rows a second;
//   - the consumption rate of the Summer consumer (the quick start's
//     handler, a Get and a Put of a row per message, RocksDB recorded into
//     recovery logs) without queries and with them, and how much the
//     queries slow it.
//
// One in-process stack (package devstack) holds -messages Add messages of
// -keys keys in -partitions partitions, each key in the partition its
// partition key maps to (runtime/partition), published once. Then, -reps
// times and in alternating order, a member of the consumer (in process,
// package membertest) consumes them all from the start, on shards of a
// run of its own, timed from applying its shards until every shard has
// read through its partition's write head; in the queried runs, the
// callers query it through its gRPC port from the moment every shard is
// primary until it has caught up. Everything shares the machine: the
// stack, the member and the callers.
//
// Run it from module bench with `go run ./cmd/querybench`. It is not part
// of `make test`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	benchv1 "github.com/gazconsumer/gazconsumer/bench/gen/gazconsumer/bench/v1"
	"github.com/gazconsumer/gazconsumer/bench/internal/summer"
	"github.com/gazconsumer/gazconsumer/bench/internal/workload"
	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"github.com/gazconsumer/gazconsumer/specs"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// config is the command line.
type config struct {
	messages, keys, partitions, reps int
	getters, scanners, page          int
}

func main() {
	var c config
	flag.IntVar(&c.messages, "messages", 2000000, "messages consumed by each run")
	flag.IntVar(&c.keys, "keys", 100000, "distinct keys of the messages")
	flag.IntVar(&c.partitions, "partitions", 4, "partitions (and shards)")
	flag.IntVar(&c.reps, "reps", 3, "repetitions of each run, with queries and without")
	flag.IntVar(&c.getters, "getters", 4, "concurrent callers of GetSum in the queried runs")
	flag.IntVar(&c.scanners, "scanners", 1, "concurrent callers of ListSums in the queried runs")
	flag.IntVar(&c.page, "page", 1000, "rows of a page of ListSums")
	var cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the whole run (stack, member and callers: one process) to this file")
	flag.Parse()
	if *cpuProfile != "" {
		var f, err = os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "querybench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	slog.SetLogLoggerLevel(slog.LevelWarn)
	if err := run(context.Background(), c); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "querybench:", err)
		os.Exit(1)
	}
}

// result is one run's measure.
type result struct {
	rate                  float64         // Messages consumed a second.
	gets                  []time.Duration // Latencies of the answered GETs.
	getSeconds            float64         // Over which the GETs were made.
	notFound, unavailable int64           // GETs answered NOT_FOUND (a key not consumed yet), or UNAVAILABLE.
	scanRows              int64
	scanSeconds           float64
}

func run(ctx context.Context, c config) error {
	var dir, err = os.MkdirTemp("", "querybench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	stack, err := devstack.Start(ctx, devstack.Options{Dir: filepath.Join(dir, "stack"), UnsafeNoFsync: true, LogLevel: slog.LevelWarn})
	if err != nil {
		return err
	}
	defer stack.Close()
	var runs []workload.Run
	for rep := range c.reps {
		runs = append(runs, workload.Run{Side: "plain", Rep: rep + 1}, workload.Run{Side: "queried", Rep: rep + 1})
	}
	if _, err = specs.ApplyJournals(ctx, stack.Journals(), "querybench journals", []byte(workload.JournalsYAML(c.partitions, runs, []string{"ours"}))); err != nil {
		return err
	}
	var fillStart = time.Now()
	heads, err := fill(ctx, stack.Journals(), c)
	if err != nil {
		return err
	}
	fmt.Printf("querybench: %d messages of %d keys in %d partitions, published in %s\n",
		c.messages, c.keys, c.partitions, time.Since(fillStart).Round(time.Millisecond))

	var watchCtx, stopWatching = context.WithCancel(ctx)
	defer stopWatching()
	var partitions = partition.NewWatched(watchCtx, stack.Journals())
	var plain, queried []result
	for i, r := range runs {
		// Alternate which of a repetition's runs goes first.
		if rep := i / 2; rep%2 == 1 {
			r = runs[i^1]
		}
		var res, err = consume(ctx, c, stack, partitions, r, heads, filepath.Join(dir, r.String()))
		if err != nil {
			return fmt.Errorf("%s: %w", r, err)
		}
		if r.Side == "plain" {
			plain = append(plain, res)
			fmt.Printf("  %-10s %8.0f msgs/s\n", r, res.rate)
		} else {
			queried = append(queried, res)
			fmt.Printf("  %-10s %8.0f msgs/s  %7.0f GETs/s (p50 %s, p99 %s)  %8.0f scanned rows/s\n",
				r, res.rate, float64(len(res.gets))/res.getSeconds, percentile(res.gets, 0.50), percentile(res.gets, 0.99),
				float64(res.scanRows)/res.scanSeconds)
		}
	}
	report(c, plain, queried)
	return nil
}

// fill publishes c.messages Adds to the partitions their keys map to, and
// returns the partitions' write heads.
func fill(ctx context.Context, jc pb.RoutedJournalClient, c config) ([]int64, error) {
	var pub = message.NewPublisher(client.NewAppendService(ctx, jc), nil)
	var rng = rand.New(rand.NewPCG(1, 2))
	var last = make([]*client.AsyncAppend, c.partitions)
	var msg benchv1.Add
	for range c.messages {
		msg.Key, msg.Value = keyOf(rng.IntN(c.keys)), rng.Int64N(1000)
		var i = partition.Index(msg.AppendPartitionKey(nil), c.partitions)
		var aa, err = pub.PublishCommitted(func(message.Mappable) (pb.Journal, string, error) {
			return workload.Input(i), workload.ContentType, nil
		}, &msg)
		if err != nil {
			return nil, fmt.Errorf("publishing to %s: %w", workload.Input(i), err)
		}
		last[i] = aa
	}
	var heads = make([]int64, c.partitions)
	for i, aa := range last {
		if aa == nil {
			return nil, fmt.Errorf("no message was published to %s", workload.Input(i))
		} else if err := aa.Err(); err != nil {
			return nil, fmt.Errorf("appending to %s: %w", workload.Input(i), err)
		}
		heads[i] = aa.Response().Commit.End
	}
	return heads, nil
}

func keyOf(k int) string { return fmt.Sprintf("key-%07d", k) }

// consume runs a member of run r until its shards have read through heads,
// querying it meanwhile if r is a queried run.
func consume(ctx context.Context, c config, stack *devstack.Stack, partitions *partition.Watched, r workload.Run, heads []int64, dir string) (result, error) {
	var res result
	app, err := benchv1.NewSummerApplication(summer.NewSummerHandler(), rocks.Opener{}, partitions)
	if err != nil {
		return res, err
	}
	var cluster = membertest.New(stack, r.EtcdPrefix(), app, dir)
	defer cluster.Close()
	m, err := cluster.Start(r.String())
	if err != nil {
		return res, err
	}
	defer func() { _ = m.Stop() }()
	var specs = make([]*pc.ShardSpec, 0, len(heads))
	for i := range heads {
		specs = append(specs, r.ShardSpec(i))
	}
	var began = time.Now()
	if err = cluster.Apply(ctx, m, specs...); err != nil {
		return res, err
	}
	for i := range heads {
		if _, err = cluster.PrimaryOf(ctx, workload.ShardID(i)); err != nil {
			return res, err
		}
	}
	var stop = func() {}
	if r.Side == "queried" {
		if stop, err = startQueries(ctx, c, m, &res); err != nil {
			return res, err
		}
	}
	for i, head := range heads {
		if err = cluster.WaitReadThrough(ctx, workload.ShardID(i), pb.Offsets{workload.Input(i): head}); err != nil {
			stop()
			return res, err
		}
	}
	res.rate = float64(c.messages) / time.Since(began).Seconds()
	stop()
	if r.Side == "queried" && c.getters != 0 && len(res.gets) == 0 {
		return res, errors.New("no GET was answered while the member consumed")
	}
	return res, nil
}

// startQueries starts the callers of GetSum and ListSums, through member
// m; stop ends them and fills res.
func startQueries(ctx context.Context, c config, m *membertest.Member, res *result) (stop func(), err error) {
	conn, err := query.Dialer(nil)(m.Svc.Endpoint())
	if err != nil {
		return nil, err
	}
	var sums = benchv1.NewSummerQueriesClient(query.NewClient(conn, nil))
	var qctx, cancel = context.WithCancel(ctx)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failure error
	var fail = func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if failure == nil && qctx.Err() == nil {
			failure = err
		}
	}
	var notFound, unavailable, rows atomic.Int64
	var began = time.Now()
	for g := range c.getters {
		wg.Go(func() {
			var rng = rand.New(rand.NewPCG(uint64(g), 7))
			var lat []time.Duration
			defer func() {
				mu.Lock()
				res.gets = append(res.gets, lat...)
				mu.Unlock()
			}()
			for qctx.Err() == nil {
				var t = time.Now()
				var _, err = sums.GetSum(qctx, &benchv1.GetSumRequest{Key: keyOf(rng.IntN(c.keys))})
				switch status.Code(err) {
				case codes.OK:
				case codes.NotFound:
					notFound.Add(1)
				case codes.Unavailable:
					unavailable.Add(1)
					time.Sleep(time.Millisecond)
					continue
				default:
					fail(fmt.Errorf("GetSum: %w", err))
					return
				}
				lat = append(lat, time.Since(t))
			}
		})
	}
	for range c.scanners {
		wg.Go(func() {
			var req = &benchv1.ListSumsRequest{Limit: int32(c.page)}
			for qctx.Err() == nil {
				var page, err = sums.ListSums(qctx, req)
				if status.Code(err) == codes.Unavailable {
					time.Sleep(time.Millisecond)
					continue
				} else if err != nil {
					fail(fmt.Errorf("ListSums: %w", err))
					return
				}
				rows.Add(int64(len(page.Sums)))
				req.PageToken = page.NextPageToken // Back to the first page after the last.
			}
		})
	}
	return func() {
		var elapsed = time.Since(began).Seconds()
		cancel()
		wg.Wait()
		_ = conn.Close()
		res.getSeconds, res.scanSeconds = elapsed, elapsed
		res.notFound, res.unavailable, res.scanRows = notFound.Load(), unavailable.Load(), rows.Load()
		slices.Sort(res.gets)
		if failure != nil {
			fmt.Fprintln(os.Stderr, "querybench:", failure)
			os.Exit(1)
		}
	}, nil
}

// report prints the medians of the runs.
func report(c config, plain, queried []result) {
	var rates = func(rs []result) []float64 {
		var out []float64
		for _, r := range rs {
			out = append(out, r.rate)
		}
		return out
	}
	var all []time.Duration
	var gets, getSeconds, scanRows, scanSeconds float64
	var notFound, unavailable int64
	var slowdowns []float64
	for i, q := range queried {
		all = append(all, q.gets...)
		gets += float64(len(q.gets))
		getSeconds += q.getSeconds
		scanRows += float64(q.scanRows)
		scanSeconds += q.scanSeconds
		notFound += q.notFound
		unavailable += q.unavailable
		slowdowns = append(slowdowns, 1-q.rate/plain[i].rate)
	}
	slices.Sort(all)
	fmt.Printf("\nconsumption, median of %d: %.0f msgs/s without queries, %.0f with %d GET and %d SCAN callers: %.1f%% slower (range %.1f%% to %.1f%%)\n",
		c.reps, median(rates(plain)), median(rates(queried)), c.getters, c.scanners,
		100*median(slowdowns), 100*slices.Min(slowdowns), 100*slices.Max(slowdowns))
	fmt.Printf("GetSum: %.0f a second; latency p50 %s, p99 %s, p99.9 %s (%d answers, %d of them NOT_FOUND: keys not yet consumed; %d UNAVAILABLE, not counted)\n",
		gets/getSeconds, percentile(all, 0.50), percentile(all, 0.99), percentile(all, 0.999), len(all), notFound, unavailable)
	fmt.Printf("ListSums: %.0f rows a second, in pages of %d merged across %d shards\n", scanRows/scanSeconds, c.page, c.partitions)
}

func median(v []float64) float64 {
	var s = slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// percentile returns the p-th quantile of sorted.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	var d = sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
	return d.Round(time.Microsecond)
}
