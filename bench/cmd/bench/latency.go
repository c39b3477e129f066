package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	benchv1 "github.com/gazconsumer/gazconsumer/bench/gen/gazconsumer/bench/v1"
	"github.com/gazconsumer/gazconsumer/bench/internal/workload"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The latency measure: how long a message waits from its append's
// acknowledgement to the durable commit of the transaction that applied it,
// under a steady live load, for ours and the anchor with their defaults.
//
// First, the anchor's maximum rate is measured as its throughput is, over
// a backlog of the workload's messages (the median of -reps runs). Then,
// -reps times, for each fraction of that rate (-latency.rates) and each side
// in rotating order: a member of the side is started with its shards
// reading from the partitions' write heads (their sources' MinOffset), and
// once every shard is primary, the driver publishes Adds of the workload's
// keys at the fraction's rate for -latency.duration, paced every half a
// millisecond; the messages acknowledged in its first -latency.warmup are
// not counted (the shards' first transactions, the broker's first
// fragments). Every append's acknowledgement is timed (the moment its
// AsyncAppend is done); every shard's commits are observed through the
// Shard API's Stat: a Stat whose ReadThrough is one past the shard's last
// observed offset returns once a transaction reading past it has committed
// (both frameworks answer so; Gazette once its acknowledgements are written
// too), and the driver asks again at once. A message's latency is the first
// observation of its shard committed through its append's end, less its
// acknowledgement. Each run's line also tells the shards' transactions
// (count, messages each, mean phases), from the metrics both sides serve
// under Gazette's names; with -profile, the last repetition's metrics and
// CPU profiles are kept. Then the sums of the run's messages are checked,
// as a throughput run's are.

// latencyConfig is the latency measure's flags.
type latencyConfig struct {
	workload  workloadSpec
	duration  time.Duration
	warmup    time.Duration // Of each run's load, whose messages are not counted.
	fractions []float64
	sides     []string
}

// commitSeen is an observation of a shard's commits: at time at, it had
// committed its source through offset.
type commitSeen struct {
	at     time.Time
	offset int64
}

// appendAcked is one append of the live load: n messages to partition part,
// acknowledged at ackAt through offset end.
type appendAcked struct {
	part  int
	n     int
	aa    *client.AsyncAppend
	ackAt time.Time
	end   int64
}

// latencySample is one live run's figures.
type latencySample struct {
	p50, p99, p999 float64 // Seconds.
	max            float64
	published      float64 // Messages a second the driver achieved.
	messages       int
	cpuSeconds     float64 // Of the consumer's process, its check taken out.
	txns           txnMetrics
}

// latencyRow summarizes a side at a fraction of the anchor's maximum rate.
type latencyRow struct {
	fraction, rate         float64
	side                   string
	published              spread
	p50, p99, p999         spread // Milliseconds.
	cpuPerM                spread
	vsAnchor50, vsAnchor99 spread // Ours' percentile over the anchor's, within each repetition.
	vsAnchor999            spread
}

// latencyRuns are the consumer runs of the latency measure: the anchor's
// over the backlog (tag max), then each side at each fraction.
func (c config) latencyRuns() []workload.Run {
	var runs []workload.Run
	for rep := 1; rep <= c.reps; rep++ {
		runs = append(runs, workload.Run{Side: "anchor", Tag: "max", Rep: rep})
		for _, f := range c.latency.fractions {
			for _, side := range c.latency.sides {
				runs = append(runs, workload.Run{Side: side, Tag: fractionTag(f), Rep: rep})
			}
		}
	}
	return runs
}

func fractionTag(f float64) string { return fmt.Sprintf("r%02.0f", f*100) }

// latency runs the latency measure on a stack of its own, and prints its
// table.
func latency(ctx context.Context, c config, env stackEnv) error {
	var w = c.latency.workload
	fmt.Printf("\nlatency, workload %s: the anchor's maximum rate over a backlog of %d messages in %d partitions, %d keys...\n",
		w.name, w.messages, w.partitions, w.keys)
	heads, want, err := fill(ctx, env.jc, w)
	if err != nil {
		return err
	}
	var maxRates []float64
	for rep := 1; rep <= c.reps; rep++ {
		var s, err = consume(ctx, c, env, workload.Run{Side: "anchor", Tag: "max", Rep: rep}, w.name, heads, want, "")
		if err != nil {
			return fmt.Errorf("the anchor's maximum rate, repetition %d: %w", rep, err)
		}
		maxRates = append(maxRates, float64(w.messages)/s.seconds)
		fmt.Printf("  rep %d anchor %10.0f msgs/s  cpu %6.2fs\n", rep, maxRates[rep-1], s.cpuSeconds)
	}
	var maxRate = spreadOf(maxRates)
	fmt.Printf("  the anchor's maximum rate: %.0f msgs/s (%.0f-%.0f), median of %d\n", maxRate.median, maxRate.lo, maxRate.hi, c.reps)

	var got = make(map[string][]latencySample) // By fraction tag and side.
	for rep := 1; rep <= c.reps; rep++ {
		for fi, f := range c.latency.fractions {
			for k := range c.latency.sides {
				var side = c.latency.sides[(k+rep+fi-1)%len(c.latency.sides)]
				var r = workload.Run{Side: side, Tag: fractionTag(f), Rep: rep, MinOffsets: slices.Clone(heads)}
				var s latencySample
				if s, heads, err = liveRun(ctx, c, env, w, r, f*maxRate.median); err != nil {
					return fmt.Errorf("%s at %.0f%% of the anchor's maximum rate, repetition %d: %w", side, f*100, rep, err)
				}
				fmt.Printf("  rep %d %3.0f%% %-8s p50 %8.2fms  p99 %8.2fms  p99.9 %8.2fms  max %8.2fms  published %9.0f msgs/s  cpu %6.2fs\n           %s\n",
					rep, f*100, side, s.p50*1e3, s.p99*1e3, s.p999*1e3, s.max*1e3, s.published, s.cpuSeconds, s.txns)
				got[r.Tag+" "+side] = append(got[r.Tag+" "+side], s)
			}
		}
	}

	var rows []latencyRow
	for _, f := range c.latency.fractions {
		for _, side := range c.latency.sides {
			var v = got[fractionTag(f)+" "+side]
			var ms = func(g func(latencySample) float64) spread {
				var out []float64
				for _, s := range v {
					out = append(out, g(s)*1e3)
				}
				return spreadOf(out)
			}
			var row = latencyRow{fraction: f, rate: f * maxRate.median, side: side,
				published: ms(func(s latencySample) float64 { return s.published / 1e3 }), // Msgs/s.
				p50:       ms(func(s latencySample) float64 { return s.p50 }),
				p99:       ms(func(s latencySample) float64 { return s.p99 }),
				p999:      ms(func(s latencySample) float64 { return s.p999 }),
				cpuPerM:   ms(func(s latencySample) float64 { return s.cpuSeconds / float64(s.messages) * 1e3 }),
			}
			if anchor := got[fractionTag(f)+" anchor"]; side != "anchor" && len(anchor) == len(v) {
				var vs = func(g func(latencySample) float64) spread {
					var out []float64
					for i := range v {
						out = append(out, g(v[i])/g(anchor[i]))
					}
					return spreadOf(out)
				}
				row.vsAnchor50 = vs(func(s latencySample) float64 { return s.p50 })
				row.vsAnchor99 = vs(func(s latencySample) float64 { return s.p99 })
				row.vsAnchor999 = vs(func(s latencySample) float64 { return s.p999 })
			}
			rows = append(rows, row)
		}
	}
	printLatency(c, w, maxRate, rows)
	return nil
}

// printLatency prints the latency table, as a Markdown table.
func printLatency(c config, w workloadSpec, maxRate spread, rows []latencyRow) {
	fmt.Printf("\nlatency, workload %s (%d keys, %d partitions), from an append's acknowledgement to the durable commit of the transaction\n"+
		"that applied it; the anchor's maximum rate %.0f msgs/s; %s of load a run (the first %s not counted); medians of %d repetitions (range), ms;\n"+
		"ratios ours/anchor taken within each repetition (goal ≤ 1 at every rate and percentile)\n\n",
		w.name, w.keys, w.partitions, maxRate.median, c.latency.duration, c.latency.warmup, c.reps)
	fmt.Println("| rate | side | published msgs/s | p50 ms | p99 ms | p99.9 ms | CPU s/M | p50 ours/anchor | p99 ours/anchor | p99.9 ours/anchor |")
	fmt.Println("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |")
	var ratio = func(s spread) string {
		if s == (spread{}) {
			return ""
		}
		var mark string
		if s.median > 1 {
			mark = " !"
		}
		return strings.TrimSpace(s.String()) + mark
	}
	for _, r := range rows {
		fmt.Printf("| %.0f%% (%.0fk/s) | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.fraction*100, r.rate/1e3, r.side,
			fmtSpread(r.published, "%.0f"), fmtSpread(r.p50, "%.2f"), fmtSpread(r.p99, "%.2f"), fmtSpread(r.p999, "%.2f"),
			fmtSpread(r.cpuPerM, "%.2f"), ratio(r.vsAnchor50), ratio(r.vsAnchor99), ratio(r.vsAnchor999))
	}
	fmt.Println("\n(! marks a median ratio above the goal of 1.)")
}

// fmtSpread formats a spread's values with verb.
func fmtSpread(s spread, verb string) string {
	return fmt.Sprintf(verb+" ("+verb+"-"+verb+")", s.median, s.lo, s.hi)
}

// liveRun runs r's member under a live load of w's keys at rate messages a
// second for c.latency.duration, from its MinOffsets, and returns its
// latencies and the partitions' write heads after.
func liveRun(ctx context.Context, c config, env stackEnv, w workloadSpec, r workload.Run, rate float64) (_ latencySample, heads []int64, err error) {
	var prof = c.profile(r.Rep, w.name+"-"+r.Tag+"-"+r.Side+"-live.pprof")
	m, err := startMember(ctx, c, env, r, prof)
	if err != nil {
		return latencySample{}, nil, err
	}
	defer func() {
		if err != nil {
			m.fail()
		}
		m.close()
	}()
	if err = m.apply(ctx, w.partitions); err != nil {
		return latencySample{}, nil, err
	}
	var primary = make(chan time.Duration, 1)
	watchPrimaries(ctx, m.sc, w.partitions, time.Now(), primary)
	if <-primary == 0 {
		return latencySample{}, nil, fmt.Errorf("%s's shards did not become primary: %w", r, ctx.Err())
	}

	// Watch every shard's commits while the load runs.
	var watchCtx, stopWatch = context.WithCancel(ctx)
	defer stopWatch()
	var seen = make([][]commitSeen, w.partitions)
	var targets = make([]chan int64, w.partitions)
	var watchErrs = make([]error, w.partitions)
	var watchers sync.WaitGroup
	for i := range w.partitions {
		targets[i] = make(chan int64, 1)
		watchers.Go(func() {
			seen[i], watchErrs[i] = watchCommits(watchCtx, m.sc, workload.ShardID(i), workload.Input(i), r.MinOffsets[i], targets[i])
		})
	}

	var loadBegan = time.Now()
	acked, want, published, err := publishAt(ctx, env.jc, w, rate, c.latency.duration)
	if err != nil {
		return latencySample{}, nil, err
	}
	heads = slices.Clone(r.MinOffsets)
	var messages int
	for _, a := range acked {
		heads[a.part] = max(heads[a.part], a.end)
		messages += a.n
	}
	for i := range targets {
		targets[i] <- heads[i]
	}
	var watched = make(chan struct{})
	go func() { watchers.Wait(); close(watched) }()
	select {
	case <-watched:
	case err = <-m.exited:
		m.stopped = true
		return latencySample{}, nil, fmt.Errorf("%s exited under load: %v", r, err)
	}
	if err = errors.Join(watchErrs...); err != nil {
		return latencySample{}, nil, err
	}
	// The shards' transactions, all committed by now: how long they ran.
	text, err := fetchMetrics(ctx, metricsURL(r.Side, m.port))
	if err != nil {
		return latencySample{}, nil, fmt.Errorf("%s: %w", r, err)
	}
	txns, err := parseTxnMetrics(string(text))
	if err != nil {
		return latencySample{}, nil, fmt.Errorf("%s: %w", r, err)
	}
	if prof != "" {
		if err = os.WriteFile(strings.TrimSuffix(prof, ".pprof")+".metrics", text, 0o644); err != nil {
			return latencySample{}, nil, err
		}
	}

	var lat = make([]weighted, 0, len(acked))
	for _, a := range acked {
		if a.ackAt.Before(loadBegan.Add(c.latency.warmup)) {
			continue
		}
		var obs = seen[a.part]
		var j, _ = slices.BinarySearchFunc(obs, a.end, func(s commitSeen, end int64) int {
			if s.offset < end {
				return -1
			} else if s.offset > end {
				return 1
			}
			return 0
		})
		if j == len(obs) {
			return latencySample{}, nil, fmt.Errorf("no commit of shard %s through %d was seen", workload.ShardID(a.part), a.end)
		}
		lat = append(lat, weighted{v: obs[j].at.Sub(a.ackAt).Seconds(), n: a.n})
	}
	var s = latencySample{
		p50: percentile(lat, 0.5), p99: percentile(lat, 0.99), p999: percentile(lat, 0.999), max: percentile(lat, 1),
		published: published, messages: messages, txns: txns,
	}
	var checkCPU float64
	if _, _, checkCPU, err = m.check(ctx, w.name+" (live, "+r.Tag+")", w.partitions, want); err != nil {
		return s, nil, err
	}
	cpu, err := m.stop(ctx, w.partitions)
	if err != nil {
		return s, nil, err
	}
	s.cpuSeconds = cpu - checkCPU
	return s, heads, nil
}

// watchCommits observes shard's commits of journal, from offset from, until
// it has seen one through the offset target sends.
func watchCommits(ctx context.Context, sc pc.ShardClient, shard pc.ShardID, journal pb.Journal, from int64, target <-chan int64) ([]commitSeen, error) {
	var seen []commitSeen
	var last, until = from, int64(-1)
	for until < 0 || last < until {
		if until < 0 {
			select {
			case until = <-target:
			default:
			}
		}
		// A Stat waits for a commit past last; it is asked again every
		// 100ms, so that the target is seen once the load has ended.
		var statCtx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
		var resp, err = sc.Stat(statCtx, &pc.StatRequest{Shard: shard, ReadThrough: pb.Offsets{journal: last + 1}})
		var at = time.Now()
		// A Stat ended by its timeout fails with DeadlineExceeded (the
		// member's deadline may pass before statCtx's own), or with Canceled
		// if the member's answer to its cancellation comes first.
		var code = status.Code(err)
		var timedOut = err != nil && ctx.Err() == nil &&
			(statCtx.Err() != nil || code == codes.DeadlineExceeded || code == codes.Canceled)
		cancel()
		if timedOut {
			continue
		} else if err != nil {
			return seen, fmt.Errorf("watching the commits of shard %s: %w", shard, err)
		} else if resp.Status != pc.Status_OK {
			return seen, fmt.Errorf("watching the commits of shard %s: %s", shard, resp.Status)
		}
		if off := resp.ReadThrough[journal]; off > last {
			seen = append(seen, commitSeen{at: at, offset: off})
			last = off
		}
	}
	return seen, nil
}

// publishAt publishes Adds of w's keys (key k to partition k mod
// partitions) at rate messages a second for d, and returns its appends
// with the times of their acknowledgements, the sums of the messages, and
// the rate achieved.
func publishAt(ctx context.Context, jc pb.RoutedJournalClient, w workloadSpec, rate float64, d time.Duration) ([]*appendAcked, map[string]int64, float64, error) {
	var pub = message.NewPublisher(client.NewAppendService(ctx, jc), nil)
	var keys = make([]string, w.keys)
	for k := range keys {
		keys[k] = keyOf(k, w.keyLen)
	}
	var rng = rand.New(rand.NewPCG(3, uint64(time.Now().UnixNano())))
	var sums = make(map[string]int64)
	var acked []*appendAcked
	var current = make([]*appendAcked, w.partitions)
	var waiters sync.WaitGroup
	var msg benchv1.Add
	var total = int(rate * d.Seconds())
	var began = time.Now()
	for i := 0; i < total; {
		var due = min(total, int(time.Since(began).Seconds()*rate)+1)
		for ; i < due; i++ {
			var k = rng.IntN(w.keys)
			var part = k % w.partitions
			msg.Key, msg.Value = keys[k], rng.Int64N(1000)
			var aa, err = pub.PublishCommitted(func(message.Mappable) (pb.Journal, string, error) {
				return workload.Input(part), workload.ContentType, nil
			}, &msg)
			if err != nil {
				return nil, nil, 0, fmt.Errorf("publishing to %s: %w", workload.Input(part), err)
			}
			sums[msg.Key] += msg.Value
			if a := current[part]; a == nil || a.aa != aa {
				a = &appendAcked{part: part, aa: aa}
				current[part] = a
				acked = append(acked, a)
				waiters.Go(func() {
					<-aa.Done()
					a.ackAt = time.Now()
				})
			}
			current[part].n++
		}
		time.Sleep(500 * time.Microsecond)
	}
	var published = float64(total) / time.Since(began).Seconds()
	waiters.Wait()
	for _, a := range acked {
		if err := a.aa.Err(); err != nil {
			return nil, nil, 0, fmt.Errorf("appending to %s: %w", workload.Input(a.part), err)
		}
		a.end = a.aa.Response().Commit.End
	}
	return acked, sums, published, nil
}

// weighted is a latency shared by n messages.
type weighted struct {
	v float64
	n int
}

// percentile is the least value of v which at least a fraction p of the
// weight is at or below.
func percentile(v []weighted, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.SortedFunc(slices.Values(v), func(a, b weighted) int {
		if a.v < b.v {
			return -1
		} else if a.v > b.v {
			return 1
		}
		return 0
	})
	var total int
	for _, x := range v {
		total += x.n
	}
	var need, cum = p * float64(total), 0
	for _, x := range v {
		if cum += x.n; float64(cum) >= need {
			return x.v
		}
	}
	return v[len(v)-1].v
}
