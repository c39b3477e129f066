// Scaffold of consumer edition.v1.Watcher, written once by protoc-gen-gazconsumer.

// Command watcher serves consumer edition.v1.Watcher as a member of its
// consumer group. The consumer is declared in edition/v1/events.proto.
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
	editionv1 "example.test/golden/edition/v1"
	"example.test/golden/scaffold/watcher"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/runconsumer"
	"github.com/gazconsumer/gazconsumer/store/rocks"
)

func main() {
	runconsumer.Main("watcher", func(d runconsumer.Deps) (runtime.Application, error) {
		return editionv1.NewWatcherApplication(watcher.NewWatcherHandler(), rocks.Opener{}, d.Partitions)
	})
}
