// Command leaderboard serves consumer gazconsumer.example.bank.v1.Leaderboard as a member of its
// consumer group. The consumer is declared in gazconsumer/example/bank/v1/leaderboard.proto.
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
	"github.com/gazconsumer/gazconsumer/example/internal/leaderboard"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/runconsumer"
	"github.com/gazconsumer/gazconsumer/store/rocks"
)

func main() {
	runconsumer.Main("leaderboard", func(d runconsumer.Deps) (runtime.Application, error) {
		return bankv1.NewLeaderboardApplication(leaderboard.NewLeaderboardHandler(), rocks.Opener{}, d.Partitions)
	})
}
