// Command bankctl drives the example bank: it publishes a load of orders and
// payments exactly once while showing the consumers' progress, queries the
// state of the ledger and the leaderboard, and checks it against the load's
// record.
//
//	bankctl publish --orders 10000 --payments 10000 --record record.json --follow
//	bankctl balances --customer customer-0007   # live, from the ledger's queries
//	bankctl inspect balances                    # offline, from the recovery logs
//	bankctl top -n 10
//	bankctl check --record record.json
//
// It reaches the brokers at --broker.address (BROKER_ADDRESS), and the
// consumers through the Shard API of a member of each: --ledger.address
// (LEDGER_ADDRESS) and --leaderboard.address (LEADERBOARD_ADDRESS). balances
// and top are live queries of the consumers' queries services, served by
// those members; inspect and check play the shards' recovery logs into a
// temporary directory, read-only, starting from the hints in etcd at
// --etcd.address (ETCD_ADDRESS) when set: an offline inspection.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
)

func main() {
	// Brokers are dialed through Gazette's dispatcher, which sends requests
	// straight to a journal's brokers.
	brokerconn.RegisterDispatcher("local")

	var ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "bankctl:", err)
		os.Exit(1)
	}
}
