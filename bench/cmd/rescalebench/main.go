// Command rescalebench measures what `gazconsumer rescale` costs when it
// splits a running consumer's shards, against the goals of issue 27:
//
//	children serve within 2× the parent's recovery time
//	bytes read per child ≤ 1.2× the parent's live state
//	consumption during the split keeps ≥ 50% of its rate before it
//
// It runs the example bank's ledger (example/cmd/ledger) as a member process
// of the in-process development stack (package devstacktest), with the
// example's journals and its two ledger shards, under a load published by
// `bankctl publish` (-messages orders and payments, as fast as the brokers
// take them). In each of -reps repetitions, on a new stack:
//
//  1. Parent recovery: after -warmup (more than the 10s in which a primary
//     first stores its recovery-log hints), the member is killed with
//     SIGKILL. The load is published to its end meanwhile: what the ledger
//     has not consumed is a backlog, which it then works through, so that
//     its consumption rate is its throughput. Once the dead member's etcd
//     lease has expired, a new member process starts; the time from its
//     start until both shards are PRIMARY is the parent's recovery time (a
//     recovery as an operator sees it: the process starting, joining, being
//     assigned, playing the recovery log). Its bytes are those of its
//     "recovery log fenced" log lines (--log.format json); the state it
//     recovered is the dead process's store files.
//  2. Rate before: the ledger's consumption over the -before seconds before
//     the split, which starts -before plus a second after the recovery.
//  3. The split: `gazconsumer rescale --consumer Ledger` on a copy of
//     example/proto whose Order and Payment families have 4 partitions
//     (BalanceChanged keeps 2: the leaderboard reads only it, so only the
//     ledger is named). Each child's time to serve runs from the command's
//     start until it is PRIMARY (the command's waits included: with the
//     stack's one etcd, it has none before it creates the new shards, whose
//     -settle runs while they serve); the time from its spec's creation is
//     printed too. Bytes each fork read,
//     and its time, are those of the member's "shard forked" log lines (a
//     fork in the parent's member, as the one ledger member forks unless
//     -fork-from-log, links the parent's files, or with -fork-copies-rows
//     reads the parent's store, and reads no log: its bytes are 0). The
//     parent's live state is the greater, as the command starts, of its
//     store's files and the live files of its newest hints. The rate during
//     the split is the ledger's consumption from the command's start to its
//     end; then every shard drops what it no longer owns (the rescale's
//     end), over transactions which consume beside: the rate while they
//     drop runs from the command's end until the last shard logged "shard
//     ended its rescale", and is held to the same goal; then each store
//     rewrites its files in the background (the rate while they compact
//     runs until the last "store compacted its files"); the rate after,
//     over -before seconds more.
//  4. The answer: the leaderboard starts, both consumers catch up, and
//     `bankctl check` must print OK, else the run fails.
//
// Consumption is counted as the BalanceChanged events the ledger writes,
// one per order or payment applied (the write heads of its journals, in
// bytes, converted with the bytes of an event measured at the end). The
// members' gazconsumer_shard_messages_total counts the messages read, which
// during a split includes those a child reads from its parent's journals
// and skips as not owned; its rate is printed beside, for information.
// Each repetition's samples are written to samples.csv in its directory,
// and with -profile, a CPU profile of the ledger member over the split's
// start to split.pprof. The members' --consumer.fork-yield is -fork-yield
// (0: a parent goes on consuming while its child forks from its store).
//
// The members are given --broker.file-root (-direct): they open the stack's
// persisted fragments themselves, recovery logs included. Without it, a
// member may retry a read of a persisted fragment forever (-direct=false
// shows it; docs/benchmarks.md).
//
// It prints each repetition's figures, then medians and ranges, the three
// ratios against their goals, and the CPU seconds of each process. Run it
// with `make bench-rescale` from the repository's root, or from bench/ with
// `go run ./cmd/rescalebench -reps 1` for a quick look. It builds the
// example's ledger, leaderboard and bankctl, and gazconsumer, from the
// main module at -root (default .., the repository's root seen from bench/)
// into its work directory.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// config is what the flags set.
type config struct {
	root      string        // Root of the main module.
	bin       string        // Directory of the built commands.
	work      string        // Directory of the runs' files.
	reps      int           // Repetitions.
	messages  int           // Orders and payments of the load.
	rate      float64       // Messages a second the load is published at (0: as fast as the brokers take them).
	customers int           // Customers of the load.
	accounts  int           // Accounts of each customer.
	txn       int           // Messages per publisher transaction.
	warmup    time.Duration // Load before the member is killed.
	before    time.Duration // Window of the rate before the split.
	settle    time.Duration // The rescale command's --settle.
	lease     time.Duration // The members' --etcd.lease.
	logLevel  string        // The ledger members' --log.level.
	keep      bool          // Keep the work directory.
	direct    bool          // The members open persisted fragments themselves (--broker.file-root).
	fromLog   bool          // New shards play their parent's recovery log (--consumer.fork-from-log).
	profile   time.Duration // CPU profile of the ledger member from the split's start, if not 0.
	windows   bool          // CPU profiles of the ledger member over the windows before and after.
	forkYield time.Duration // The members' --consumer.fork-yield.
	copyRows  bool          // New shards copy rows from a local parent's store (--consumer.fork-copies-rows).
}

func main() {
	var c config
	flag.StringVar(&c.root, "root", "..", "root of the gazconsumer repository (the main module)")
	flag.IntVar(&c.reps, "reps", 3, "repetitions, each on a new stack; medians and ranges are reported")
	flag.IntVar(&c.messages, "messages", 1200000, "orders and payments of the load, half each")
	flag.Float64Var(&c.rate, "rate", 0, "messages a second the load is published at (0: as fast as the brokers take them)")
	flag.IntVar(&c.customers, "customers", 20000, "customers of the load (3 accounts each): the ledger's state grows with them")
	flag.IntVar(&c.accounts, "accounts", 3, "accounts of each customer")
	flag.IntVar(&c.txn, "txn", 100, "messages per publisher transaction")
	flag.DurationVar(&c.warmup, "warmup", 13*time.Second, "load consumed before the member is killed (more than 10s: a primary stores its recovery-log hints every 10s)")
	flag.DurationVar(&c.before, "before", 5*time.Second, "window of the consumption rate before the split")
	flag.DurationVar(&c.settle, "settle", time.Second, "--settle of gazconsumer rescale: the time new shards give producers to switch to the new journals before they read their parents' journals' heads")
	flag.DurationVar(&c.lease, "lease", 2*time.Second, "--etcd.lease of the members")
	flag.StringVar(&c.logLevel, "ledger-log-level", "info", "--log.level of the ledger members (debug logs each transaction a splitting shard commits)")
	flag.BoolVar(&c.direct, "direct", true, "members open the stack's persisted fragments themselves (--broker.file-root), recovery logs included; without, a member may retry a read of a persisted fragment forever (see docs/benchmarks.md)")
	flag.BoolVar(&c.fromLog, "fork-from-log", false, "new shards always play their parent's recovery log (the members' --consumer.fork-from-log), rather than read the parent's store when its primary runs in their member, as the one ledger member here does")
	flag.BoolVar(&c.copyRows, "fork-copies-rows", false, "new shards whose parent's primary runs in their member copy the rows they own from its store (the members' --consumer.fork-copies-rows), rather than link its files")
	flag.DurationVar(&c.forkYield, "fork-yield", 0, "the members' --consumer.fork-yield: if not 0, how long at most a parent holds its reads while a child forks from its store (0: it goes on consuming)")
	flag.BoolVar(&c.windows, "profile-windows", false, "CPU profiles of the ledger member over the windows of the rates before the split and after the compactions, to rep-N/before.pprof and after.pprof")
	flag.DurationVar(&c.profile, "profile", 0, "if not 0, a CPU profile of the ledger member of this long from the split's start, to rep-N/split.pprof (go tool pprof)")
	flag.StringVar(&c.work, "dir", "", "directory of the runs' files (default: a temporary one, removed after)")
	flag.BoolVar(&c.keep, "keep", false, "keep the directory of the runs' files (members' logs, records, the command's output in rep-N/rescale.out, each line after the seconds since its start)")
	flag.Parse()
	if c.reps < 1 {
		fatal(fmt.Errorf("-reps %d: want at least 1", c.reps))
	}
	var ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c); err != nil {
		stop()
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "rescalebench:", err)
	os.Exit(1)
}

func run(ctx context.Context, c config) (err error) {
	if c.root, err = filepath.Abs(c.root); err != nil {
		return err
	}
	if c.work == "" {
		if c.work, err = os.MkdirTemp("", "rescalebench-"); err != nil {
			return err
		}
	}
	if !c.keep {
		defer os.RemoveAll(c.work)
	} else {
		defer fmt.Printf("files of the runs kept in %s\n", c.work)
	}
	c.bin = filepath.Join(c.work, "bin")
	fmt.Printf("building ledger, leaderboard, bankctl and gazconsumer from %s\n", c.root)
	if err = build(ctx, c.root, c.bin); err != nil {
		return err
	}
	protos, err := grownProtos(c.root, filepath.Join(c.work, "proto"))
	if err != nil {
		return err
	}
	fmt.Printf("load: %d orders and %d payments of %d customers (%d accounts each), in transactions of %d; rescale --settle %s; member lease %s; members read fragments directly: %t; forks play the parent's log: %t; forks copy rows: %t; parents yield to forks for at most %s\n",
		c.messages/2, c.messages-c.messages/2, c.customers, c.accounts, c.txn, c.settle, c.lease, c.direct, c.fromLog, c.copyRows, c.forkYield)

	var results []*result
	for rep := range c.reps {
		fmt.Printf("rep %d of %d\n", rep+1, c.reps)
		var r, err = runRep(ctx, c, rep, protos)
		if err != nil {
			return fmt.Errorf("rep %d: %w", rep+1, err)
		}
		r.print()
		results = append(results, r)
	}
	summarize(results)
	return nil
}
