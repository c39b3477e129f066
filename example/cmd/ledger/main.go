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
package main

import (
	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/example/internal/ledger"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/runconsumer"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	channelzsvc "google.golang.org/grpc/channelz/service"
)

func main() {
	runconsumer.Main("ledger", func(d runconsumer.Deps) (runtime.Application, error) {
		// The member's port also serves services of the application's own,
		// registered through d.Server: under the member's TLS, and each call
		// verified by --consumer.auth-keys (a READ token, by default). Here,
		// gRPC's channelz (grpc.channelz.v1.Channelz: the member's gRPC
		// channels, servers and sockets, as grpcdebug shows them), which
		// needs no .proto of ours and tells the operator only what a token
		// should be needed for.
		channelzsvc.RegisterChannelzServiceToServer(d.Server)
		return bankv1.NewLedgerApplication(ledger.NewLedgerHandler(), rocks.Opener{}, d.Partitions)
	})
}
