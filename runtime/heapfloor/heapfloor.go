// Package heapfloor keeps Go's garbage collector from collecting a heap
// smaller than a floor.
//
// Go collects once the heap has grown by GOGC percent (100 by default) of
// what the last collection left live, and at 4 MiB at the least. A member
// starting, or one whose shards hold little in memory, has a live heap of a
// few to some tens of MiB, so it collects every few MiB it allocates, and
// each collection marks the whole live heap again: a floor of 64 MiB took a
// sixth off the CPU of a member starting up, consuming 10,000 messages and
// stopping, and 2 to 6% off one consuming a million small messages of
// 10,000 keys with four shards (bench/cmd/bench). With a floor, the collector lets the heap grow to the floor before it
// collects, however little is live: the heap's goal is the greater of the
// floor and what GOGC sets. A heap whose live part is more than half the
// floor is collected as Go collects it, so the floor costs at most its own
// size in memory, and nothing once a member's row caches fill. GOMEMLIMIT,
// if set, still bounds the heap.
//
// A Floor sets the collector's GOGC after each collection (debug.SetGCPercent)
// from the live heap that collection left (runtime/metrics'
// /gc/heap/live:bytes): a live heap L and a GOGC of G give a goal of L×(1+G/100),
// so it sets G = max(GOGC, floor×100/L − 100). It runs as a cleanup of an
// object left for each collection to find unreachable, so it tunes after
// the collection, or after the next if one began marking as it armed.
package heapfloor

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync"
)

// DefaultBytes is the floor of a member's heap unless set otherwise.
const DefaultBytes = 64 << 20

// minimumHeap is the least heap goal of Go's collector at a GOGC of 100
// (runtime's defaultHeapMinimum, which scales with GOGC): the goal before
// the first collection.
const minimumHeap = 4 << 20

// liveMetric is the runtime metric of the heap the last collection marked
// live.
const liveMetric = "/gc/heap/live:bytes"

// Floor keeps the collector from collecting a heap smaller than its bytes,
// from Start until Stop.
type Floor struct {
	bytes uint64
	base  int // GOGC of the environment.

	mu      sync.Mutex
	stopped bool
	sample  []metrics.Sample
	last    int // GOGC it set last.
}

// Start returns a Floor of bytes, which sets the collector's GOGC from now
// on, from the GOGC of the environment (100 if unset), as Go reads it. It
// fails if bytes is negative. A floor of 0, or a collector turned off
// (GOGC=off), leaves the collector as it is: the Floor does nothing. A
// process has one Floor at a time: two would set GOGC in turn.
func Start(bytes int64) (*Floor, error) {
	if bytes < 0 {
		return nil, fmt.Errorf("heap floor of %d bytes: can't be negative", bytes)
	}
	var base = envPercent(os.Getenv("GOGC"))
	var f = &Floor{
		bytes:  uint64(bytes),
		base:   base,
		sample: []metrics.Sample{{Name: liveMetric}},
		last:   base,
	}
	if bytes == 0 || base < 0 {
		f.stopped = true
		return f, nil
	}
	f.tune()
	f.arm()
	return f, nil
}

// envPercent returns the GOGC of the environment variable's value v, as Go
// reads it: off is -1, an integer is itself, anything else 100.
func envPercent(v string) int {
	if v == "off" {
		return -1
	}
	if n, err := strconv.ParseInt(v, 10, 32); err == nil {
		return int(n)
	}
	return 100
}

// Stop gives the collector back the GOGC of the environment.
func (f *Floor) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return
	}
	f.stopped = true
	debug.SetGCPercent(f.base)
}

// GCPercent returns the GOGC the Floor set last (the environment's, if it
// set none).
func (f *Floor) GCPercent() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.last
}

// sentinel is allocated for the collector to find unreachable: its cleanup
// runs after the collection which did, and tunes the Floor for the next.
// It holds a pointer so that it's never one of the tiny allocations that
// share a block (whose cleanups may wait for the block's other objects).
type sentinel struct{ _ *byte }

// arm has the next collection call tune, then arm again.
func (f *Floor) arm() {
	runtime.AddCleanup(new(sentinel), func(f *Floor) {
		if f.tune() {
			f.arm()
		}
	}, f)
}

// tune sets GOGC for the live heap of the last collection. It returns
// whether the Floor still runs.
func (f *Floor) tune() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	metrics.Read(f.sample)
	var live uint64
	if s := f.sample[0]; s.Value.Kind() == metrics.KindUint64 {
		live = s.Value.Uint64()
	}
	if p := Percent(live, f.bytes, f.base); p != f.last {
		debug.SetGCPercent(p)
		f.last = p
	}
	return true
}

// Percent returns the GOGC that gives a live heap of live bytes a goal of
// floor bytes, or base (the GOGC otherwise) if base gives it a larger one.
// Go's least goal (4 MiB at a GOGC of 100) scales with GOGC: a live heap
// smaller than it (before the first collection, 0) is given the GOGC whose
// least goal is the floor.
func Percent(live, floor uint64, base int) int {
	if base < 0 || floor == 0 {
		return base
	}
	var p uint64
	if floor > math.MaxUint64/100 {
		p = math.MaxUint64 // Clamped below: floor*100 would overflow.
	} else if live < minimumHeap {
		p = floor * 100 / minimumHeap
	} else if floor > live {
		p = floor*100/live - 100
	}
	if p > math.MaxInt32 {
		p = math.MaxInt32
	}
	return max(base, int(p))
}
