// Command anchor serves the benchmark's anchor consumer (package anchor) with
// Gazette's runconsumer, as Gazette's example consumers are served:
// `anchor serve --etcd.address ... --broker.address ...`.
//
// If BENCH_CPUPROFILE names a file, a CPU profile of the whole run is
// written to it.
package main

import (
	"github.com/gazconsumer/gazconsumer/bench/anchor"
	"github.com/gazconsumer/gazconsumer/bench/internal/profile"
	"go.gazette.dev/core/mainboilerplate/runconsumer"
)

func main() {
	defer profile.Start()()
	runconsumer.Main(anchor.Summer{})
}
