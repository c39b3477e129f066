// Package profile writes a CPU profile of a benchmark command to the file
// named by the environment variable BENCH_CPUPROFILE, if set, and a profile
// of its allocations to the file named by BENCH_ALLOCPROFILE, if set.
package profile

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// Env is the environment variable naming the profile's file.
const Env = "BENCH_CPUPROFILE"

// AllocEnv is the environment variable naming the file of the profile of
// allocations, written as the command ends.
const AllocEnv = "BENCH_ALLOCPROFILE"

// Start starts profiling if Env is set, and returns the function which
// stops it and writes the profile.
func Start() (stop func()) {
	var cpu, allocs = startCPU(), os.Getenv(AllocEnv)
	return func() {
		cpu()
		if allocs == "" {
			return
		}
		var f, err = os.Create(allocs)
		if err == nil {
			err = pprof.Lookup("allocs").WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "profile: %s=%s: %v\n", AllocEnv, allocs, err)
		}
	}
}

// startCPU starts profiling the CPU if Env is set, and returns the function
// which stops it and writes the profile.
func startCPU() (stop func()) {
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
