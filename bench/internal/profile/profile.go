// Package profile writes a CPU profile of a benchmark command to the file
// named by the environment variable BENCH_CPUPROFILE, if set.
package profile

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// Env is the environment variable naming the profile's file.
const Env = "BENCH_CPUPROFILE"

// Start starts profiling if Env is set, and returns the function which
// stops it and writes the profile.
func Start() (stop func()) {
	var path = os.Getenv(Env)
	if path == "" {
		return func() {}
	}
	var f, err = os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "profile: %s=%s: %v\n", Env, path, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "profile: closing %s: %v\n", path, err)
		}
	}
}
