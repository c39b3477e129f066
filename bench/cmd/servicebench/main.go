// Command servicebench measures the consumer service on the in-process
// stack and prints its figures:
//
//   - messages per second consumed end to end (shards with RocksDB stores
//     recorded into recovery logs, exactly-once transactions publishing
//     onward), against the rate of merely reading and decoding the same
//     journals on the same stack, and their ratio; once without standbys,
//     once with a hot standby per shard on a second member;
//   - fail-over time with a shard holding -state bytes of state: from the
//     abrupt loss of its primary's member until its hot standby has
//     processed a message published after the loss, with the share of it
//     spent waiting for the lost member's lease to expire;
//   - the time a new member takes to recover that state from the recovery
//     log to become a standby.
//
// Run it from module bench with `go run ./cmd/servicebench` (-state 64MiB for
// a quick run). It is not part of `make test`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gazconsumer/gazconsumer/bench/internal/benchstate"
	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest/sums"
	"github.com/prometheus/client_golang/prometheus"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
)

func main() {
	var (
		shards   = flag.Int("shards", 4, "shards (and input journals) of the throughput measure")
		messages = flag.Int("messages", 200000, "messages of the throughput measure")
		state    = flag.String("state", "1GiB", "state of the fail-over measure's shard (e.g. 64MiB, 1GiB)")
		pad      = flag.String("pad", "64KiB", "bytes of state each message of the fail-over measure adds")
		lease    = flag.Duration("lease", 3*time.Second, "etcd lease TTL of members: a lost member's shards fail over once it expires")
		skip     = flag.String("skip", "", "measures to skip: throughput, failover")
	)
	flag.Parse()
	slog.SetLogLoggerLevel(slog.LevelWarn)

	var stateBytes, err1 = benchstate.ParseBytes(*state)
	var padBytes, err2 = benchstate.ParseBytes(*pad)
	if err := errors.Join(err1, err2); err != nil || padBytes < 8 {
		fmt.Fprintf(os.Stderr, "servicebench: -state and -pad need sizes like 64MiB (pad at least 8 bytes): %v\n", err)
		os.Exit(2)
	}
	var ctx = context.Background()
	if !strings.Contains(*skip, "throughput") {
		for _, standbys := range []int{0, 1} {
			if err := throughput(ctx, *shards, *messages, standbys, *lease); err != nil {
				fmt.Fprintln(os.Stderr, "servicebench:", err)
				os.Exit(1)
			}
		}
	}
	if !strings.Contains(*skip, "failover") {
		if err := failover(ctx, stateBytes, padBytes, *lease); err != nil {
			fmt.Fprintln(os.Stderr, "servicebench:", err)
			os.Exit(1)
		}
	}
}

// newCluster starts a stack with the journals of n shards, and a cluster
// on it. close stops both.
func newCluster(ctx context.Context, n int, lease time.Duration) (c *sums.Cluster, close func(), err error) {
	var stack *devstacktest.Stack
	if stack, err = devstacktest.Start(ctx, ""); err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "gazconsumer-bench-")
	if err == nil {
		c, err = sums.New(ctx, stack.Stack, "bench", n, dir, 64<<20)
	}
	if err != nil {
		stack.Close()
		os.RemoveAll(dir)
		return nil, nil, err
	}
	c.LeaseTTL = lease
	return c, func() {
		for _, m := range c.Live() {
			_ = m.Kill()
		}
		c.Close()
		stack.Close()
		os.RemoveAll(dir)
	}, nil
}

func throughput(ctx context.Context, shards, messages, standbys int, lease time.Duration) error {
	var c, closeAll, err = newCluster(ctx, shards, lease)
	if err != nil {
		return err
	}
	defer closeAll()
	for i := range standbys + 1 {
		if _, err = c.Start(fmt.Sprintf("member-%d", i)); err != nil {
			return err
		}
	}
	tp, err := c.MeasureThroughput(ctx, messages, func(s *pc.ShardSpec) { s.HotStandbys = uint32(standbys) })
	if err != nil {
		return err
	}
	fmt.Printf("throughput, %d shards, %d messages, %d hot standby per shard on %d members:\n", shards, messages, standbys, standbys+1)
	fmt.Printf("  raw read+decode: %10.0f msgs/s (%s)\n", tp.RawRate(), tp.Raw.Round(time.Millisecond))
	fmt.Printf("  consumed e2e:    %10.0f msgs/s (%s, from applying the shards)\n", tp.ConsumeRate(), tp.Consume.Round(time.Millisecond))
	fmt.Printf("  ratio e2e/raw:   %10.3f\n", tp.Ratio())
	return nil
}

func failover(ctx context.Context, stateBytes, padBytes int64, lease time.Duration) error {
	var c, closeAll, err = newCluster(ctx, 1, lease)
	if err != nil {
		return err
	}
	defer closeAll()
	a, err := c.Start("member-a")
	if err != nil {
		return err
	}
	if _, err = c.Start("member-b"); err != nil {
		return err
	}
	if err = c.ApplyShards(ctx, a, nil); err != nil {
		return err
	}

	// Load the state through the shard, which its standby follows.
	var feedCtx, stopFeed = context.WithCancel(ctx)
	defer stopFeed()
	var feed = c.NewFeed(feedCtx)
	feed.Pad = int(padBytes)
	var n = int((stateBytes + padBytes - 1) / padBytes)
	var began = time.Now()
	fmt.Printf("fail-over: loading %d messages of %d bytes (%.0f MiB of state)...\n", n, padBytes, float64(int64(n)*padBytes)/(1<<20))
	for done := 0; done < n; {
		var batch = min(n-done, max(1, int((64<<20)/padBytes)))
		if err = feed.Publish(batch); err != nil {
			return err
		}
		done += batch
		if err = c.WaitCaughtUp(ctx); err != nil { // Don't run far ahead of the shard.
			return err
		}
		fmt.Printf("\r  %3d%%", done*100/n)
	}
	logHead, err := membertest.WriteHead(ctx, c.Stack.Journals(), c.ShardSpec(0).RecoveryLog())
	if err != nil {
		return err
	}
	fmt.Printf("\r  loaded in %s; the recovery log holds %.0f MiB\n", time.Since(began).Round(time.Millisecond), float64(logHead)/(1<<20))
	if err = waitRecovered(ctx); err != nil {
		return err
	}

	// Lose the primary's member abruptly, publish, and time until the
	// standby has processed the message.
	lost, err := c.PrimaryOf(ctx, sums.ShardID(0))
	if err != nil {
		return err
	}
	var watch = watchPrimary(ctx, c, lost.ID())
	began = time.Now()
	lost.Svc.Abort()
	if err = feed.Publish(1); err != nil {
		return err
	}
	if err = c.WaitCaughtUp(ctx); err != nil {
		return err
	}
	var total = time.Since(began)
	var promoted = <-watch
	fmt.Printf("  fail-over (member lost -> standby processing): %s\n", total.Round(time.Millisecond))
	fmt.Printf("    until the lost member's lease expired and the standby was promoted: %s (lease TTL %s)\n", promoted.Round(time.Millisecond), lease)
	fmt.Printf("    from promotion to processing: %s\n", (total - promoted).Round(time.Millisecond))
	if err = lost.Stop(); err != nil {
		return err
	}

	// A new member recovers the state from the log to become the standby.
	began = time.Now()
	m, err := c.Start("member-c")
	if err != nil {
		return err
	}
	if _, err = c.WaitStatus(ctx, sums.ShardID(0), m.ID(), pc.ReplicaStatus_STANDBY); err != nil {
		return err
	}
	var took = time.Since(began)
	var played = gauge("gazconsumer_shard_recovery_played_bytes")
	if logHead, err = membertest.WriteHead(ctx, c.Stack.Journals(), c.ShardSpec(0).RecoveryLog()); err != nil {
		return err
	}
	fmt.Printf("  recovery of a new standby from the log: %s (%.0f MiB played of a log now of %.0f MiB, %.0f MiB/s)\n",
		took.Round(time.Millisecond), played/(1<<20), float64(logHead)/(1<<20), played/(1<<20)/took.Seconds())
	return nil
}

// waitRecovered waits until the standby has played the recovery log
// through its write head.
func waitRecovered(ctx context.Context) error {
	for gauge("gazconsumer_shard_recovery_played_bytes") == 0 || gauge("gazconsumer_shard_recovery_remaining_bytes") != 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// watchPrimary returns how long until shard-0's primary is another member
// than lost, polling.
func watchPrimary(ctx context.Context, c *sums.Cluster, lost pb.ProcessSpec_ID) <-chan time.Duration {
	var out = make(chan time.Duration, 1)
	var began = time.Now()
	go func() {
		for {
			for _, m := range c.Live() {
				if shards, err := c.List(ctx, m); err == nil && len(shards) == 1 {
					if rt := shards[0].Route; rt.Primary != -1 && rt.Members[rt.Primary] != lost {
						out <- time.Since(began)
						return
					}
					break
				}
			}
			if ctx.Err() != nil {
				out <- 0
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return out
}

// gauge is the value of the gauge name of shard-0, or zero.
func gauge(name string) float64 {
	var mfs, _ = prometheus.DefaultGatherer.Gather()
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, lp := range m.Label {
				if lp.GetName() == "shard" && lp.GetValue() == "shard-0" {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}
