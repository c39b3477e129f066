package rocks

import (
	"runtime"
	"sync"

	"github.com/linxGnu/grocksdb"
)

// The databases of a process run their flushes and compactions on pools of
// threads that they share, those of RocksDB's default environment (which
// the stores' environment, recording their files, schedules on). A
// database's open grows them to what its own options ask, never shrinks
// them: RocksDB's defaults (max_background_jobs of 2) leave one thread for
// the flushes of every store of a member. Two stores flushing at once then
// take turns: a rescale's two parents in one member flushing ahead of
// their links (Store.FlushAhead) took the time of both flushes for the
// second (BenchmarkFlushTogether: 82 ms against 45-51 ms for two flushes of
// 20 MB, with one thread and with two). So the first open of a store gives
// the flushes as many threads as the process has processors to run Go
// (runtime.GOMAXPROCS, which follows a container's limit of processors),
// and at least two: a memtable not flushed in time stalls its store's
// commits (RocksDB stops its writes while its memtable is full and an
// earlier one waits for its flush).

// minFlushThreads is the fewest threads for the flushes of a process's
// stores.
const minFlushThreads = 2

var flushThreads sync.Once

// flushThreadsOf returns the threads for the flushes of a process whose Go
// code runs on procs processors.
func flushThreadsOf(procs int) int { return max(procs, minFlushThreads) }

// sizeFlushThreads grows, once a process, the pool of threads of its
// stores' flushes (RocksDB's high-priority pool) to flushThreadsOf the
// processors Go runs on, unless it's larger already.
func sizeFlushThreads() {
	flushThreads.Do(func() {
		var env = grocksdb.NewDefaultEnv()
		defer env.Destroy() // The default environment stays: this is a handle of it.
		if n := flushThreadsOf(runtime.GOMAXPROCS(0)); env.GetHighPriorityBackgroundThreads() < n {
			env.SetHighPriorityBackgroundThreads(n)
		}
	})
}
