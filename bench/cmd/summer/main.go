// Command summer serves consumer gazconsumer.bench.v1.Summer as a member of its
// consumer group. The consumer is declared in gazconsumer/bench/v1/sums.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit.
//
// It is configured as Gazette's consumers are, by flags or the environment:
// --etcd.address (ETCD_ADDRESS), --broker.address (BROKER_ADDRESS),
// --consumer.port (CONSUMER_PORT), and more (run it with -help). Its shards
// are applied with gazctl, against the address the member serves on:
// `gazctl shards apply --consumer.address http://HOST:PORT --specs FILE`.
// SIGTERM or Ctrl-C hands its shards to other members and stops it.
//
// The benchmark added two things to the scaffold: --summer.aggregate runs
// the handler summer.Aggregator, which sums in memory within a transaction
// as Gazette's examples do, in place of summer.Handler's Get and Put of a
// row per message; and if BENCH_CPUPROFILE names a file, a CPU profile of
// the whole run is written to it.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	benchv1 "github.com/gazconsumer/gazconsumer/bench/gen/gazconsumer/bench/v1"
	"github.com/gazconsumer/gazconsumer/bench/internal/profile"
	"github.com/gazconsumer/gazconsumer/bench/internal/summer"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/runconsumer"
	"github.com/gazconsumer/gazconsumer/store/rocks"
)

func main() {
	defer profile.Start()()
	var flags runconsumer.Flags
	flags.Register(flag.CommandLine, "summer")
	var aggregate = flag.Bool("summer.aggregate", false, "sum in memory within a transaction, writing each row once as it finalizes")
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: flags.LogLevel})))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	err := runconsumer.Serve(ctx, flags, func(d runconsumer.Deps) (runtime.Application, error) {
		var handler benchv1.SummerHandler = summer.NewSummerHandler()
		if *aggregate {
			handler = summer.NewAggregator()
		}
		return benchv1.NewSummerApplication(handler, rocks.Opener{}, d.Partitions)
	})
	if err != nil {
		slog.Error("summer stopped", "err", err)
		os.Exit(1)
	}
}
