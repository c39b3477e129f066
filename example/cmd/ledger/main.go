// Command ledger serves consumer gazconsumer.example.bank.v1.Ledger as a member of its
// consumer group. The consumer is declared in gazconsumer/example/bank/v1/ledger.proto.
//
// protoc-gen-gazconsumer wrote this file once, and never overwrites it: it is
// yours to edit.
//
// It is configured as Gazette's consumers are, by flags or the environment:
// --etcd.address (ETCD_ADDRESS), --broker.address (BROKER_ADDRESS),
// --consumer.port (CONSUMER_PORT), TLS and authorization (--*.cert-file,
// --consumer.auth-keys, ...), and more (run it with -help). Its shards are
// applied with gazctl, against the address the member serves on:
// `gazctl shards apply --consumer.address http://HOST:PORT --specs FILE`.
// SIGTERM or Ctrl-C hands its shards to other members and stops it; its exit
// code tells why it stopped (runconsumer.ExitCode).
//
// Its own flag --hold-window (LEDGER_HOLD_WINDOW) is how long the ledger
// holds an order's amount for the order's payment before it refunds it
// (ledger.DefaultHoldWindow if unset): a handler's parameter, which the
// demo and the tests set to seconds.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/example/internal/ledger"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/runconsumer"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	channelzsvc "google.golang.org/grpc/channelz/service"
)

func main() {
	var window = ledger.DefaultHoldWindow
	if v := os.Getenv("LEDGER_HOLD_WINDOW"); v != "" {
		var err error
		if window, err = time.ParseDuration(v); err != nil {
			fmt.Fprintf(os.Stderr, "LEDGER_HOLD_WINDOW=%q: %v\n", v, err)
			os.Exit(runconsumer.ExitFailure)
		}
	}
	// runconsumer.Main parses flag.CommandLine, this flag among its own.
	flag.DurationVar(&window, "hold-window", window, "how long an order's amount is held for its payment before it is refunded (env LEDGER_HOLD_WINDOW)")
	runconsumer.Main("ledger", func(d runconsumer.Deps) (runtime.Application, error) {
		if window <= 0 {
			return nil, fmt.Errorf("--hold-window %s is not positive", window)
		}
		// The member's port also serves services of the application's own,
		// registered through d.Server: under the member's TLS, and each call
		// verified by --consumer.auth-keys (a READ token, by default). Here,
		// gRPC's channelz (grpc.channelz.v1.Channelz: the member's gRPC
		// channels, servers and sockets, as grpcdebug shows them), which
		// needs no .proto of ours and tells the operator only what a token
		// should be needed for.
		channelzsvc.RegisterChannelzServiceToServer(d.Server)
		return bankv1.NewLedgerApplication(ledger.NewLedgerHandler().WithHoldWindow(window), rocks.Opener{}, d.Partitions)
	})
}
