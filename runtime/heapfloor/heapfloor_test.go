package heapfloor_test

import (
	"math"
	"math/big"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/heapfloor"
)

const mib = 1 << 20

func TestPercent(t *testing.T) {
	for _, tc := range []struct {
		live, floor uint64
		base, want  int
	}{
		{0, 64 * mib, 100, 1600},                        // Before the first collection: the least goal is the floor.
		{3 * mib, 64 * mib, 100, 1600},                  // Below Go's least goal, likewise.
		{16 * mib, 64 * mib, 100, 300},                  // 16 MiB × 4 = 64 MiB.
		{32 * mib, 64 * mib, 100, 100},                  // GOGC's own goal is the floor.
		{48 * mib, 64 * mib, 100, 100},                  // GOGC's goal is above it.
		{1 << 40, 64 * mib, 100, 100},                   // A large heap.
		{16 * mib, 64 * mib, 400, 400},                  // A GOGC set higher stays.
		{16 * mib, 0, 100, 100},                         // No floor.
		{16 * mib, 64 * mib, -1, -1},                    // GOGC=off stays off.
		{4 * mib, 1 << 62, 100, math.MaxInt32},          // Clamped.
		{5 * mib, 1 << 58, 100, math.MaxInt32},          // floor*100 overflows.
		{0, math.MaxInt64, 100, math.MaxInt32},          // The largest flag.
		{0, math.MaxUint64/100 + 1, 100, math.MaxInt32}, // floor*100 would wrap to 84.
		{1 << 40, 1 << 50, 100, 102300},                 // 1 PiB over 1 TiB: no overflow.
		{64 * mib, 64 * mib, 50, 50},                    // At the floor.
		{63 * mib, 64 * mib, 0, 1},                      // GOGC=0 below the floor: just above it.
	} {
		if got := heapfloor.Percent(tc.live, tc.floor, tc.base); got != tc.want {
			t.Errorf("Percent(%d MiB, %d MiB, %d) = %d, want %d", tc.live/mib, tc.floor/mib, tc.base, got, tc.want)
		}
	}
}

// cycles returns the collections completed so far.
func cycles() uint64 {
	var s = []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// live returns the heap the last collection left live.
func live() uint64 {
	var s = []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

var sink []byte

// churn allocates n bytes of garbage in blocks of 4 KiB, and returns how
// many collections completed meanwhile.
func churn(n int) uint64 {
	var before = cycles()
	for range n / 4096 {
		sink = make([]byte, 4096)
	}
	sink = nil
	return cycles() - before
}

func TestFloorCollectsLess(t *testing.T) {
	t.Setenv("GOGC", "100")
	var base = debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	runtime.GC()

	var without = churn(256 * mib)
	var f, err = heapfloor.Start(128 * mib)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC() // Its cleanup tunes the floor for the live heap it leaves.
	var with = churn(256 * mib)
	f.Stop()
	t.Logf("collections while allocating 256 MiB: %d without a floor, %d with a floor of 128 MiB", without, with)
	if with > 4 || without < 4*with || without < 8 {
		t.Errorf("collections while allocating 256 MiB: %d without a floor, %d with a floor of 128 MiB: want at most 4 with it, and 4 times as many without", without, with)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC after Stop = %d, want 100 as before Start", got)
	}
	if again := churn(256 * mib); again < 4*with || again < 8 {
		t.Errorf("collections while allocating 256 MiB after Stop: %d, want as many as without a floor (%d)", again, without)
	}
}

func TestFloorFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	var base = debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	var f, err = heapfloor.Start(64 * mib)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()

	for _, hold := range []int{0, 24 * mib, 48 * mib, 0} {
		var held = make([]byte, hold)
		// The cleanup tuning the floor after a collection runs soon after
		// it, or after the next one if it armed while that one marked.
		var want int
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
			runtime.GC()
			want = heapfloor.Percent(live(), 64*mib, 100)
			for wait := time.Now().Add(100 * time.Millisecond); f.GCPercent() != want && time.Now().Before(wait); {
				time.Sleep(time.Millisecond)
			}
			if f.GCPercent() == want {
				break
			}
		}
		if got := f.GCPercent(); got != want {
			t.Errorf("holding %d MiB (live %d MiB): GOGC %d, want %d", hold/mib, live()/mib, got, want)
		}
		if hold == 48*mib && want != 100 {
			t.Errorf("holding 48 MiB: want GOGC 100, computed %d", want)
		}
		runtime.KeepAlive(held)
	}
}

func TestFloorOff(t *testing.T) {
	if _, err := heapfloor.Start(-1); err == nil {
		t.Error("Start(-1): no error")
	}
	var base = debug.SetGCPercent(-1) // As GOGC=off sets it.
	defer debug.SetGCPercent(base)
	t.Setenv("GOGC", "off")
	var f, err = heapfloor.Start(64 * mib)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	if got := f.GCPercent(); got != -1 {
		t.Errorf("GOGC=off: the floor set %d", got)
	}
	f.Stop()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GOGC=off: %d after Stop", got)
	}

	t.Setenv("GOGC", "250")
	debug.SetGCPercent(250)
	if f, err = heapfloor.Start(0); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	if got := debug.SetGCPercent(250); got != 250 {
		t.Errorf("a floor of 0 set GOGC %d", got)
	}
	f.Stop()

	// A GOGC of the environment is the least the floor sets, and what it
	// gives back.
	if f, err = heapfloor.Start(64 * mib); err != nil {
		t.Fatal(err)
	}
	if got := f.GCPercent(); got < 250 {
		t.Errorf("GOGC=250: the floor set %d", got)
	}
	f.Stop()
	if got := debug.SetGCPercent(100); got != 250 {
		t.Errorf("GOGC=250: %d after Stop", got)
	}
}

// FuzzPercent checks Percent against the goal it promises, computed
// without overflow: a GOGC of at least base, giving a live heap of live
// bytes a goal of floor bytes (Go's least goal, for a live heap below it),
// within 2% of the live heap (the percent's rounding), unless clamped.
func FuzzPercent(f *testing.F) {
	f.Add(uint64(16*mib), uint64(64*mib), 100)
	f.Add(uint64(0), uint64(64*mib), 100)
	f.Add(uint64(3*mib), uint64(100*mib), 50)
	f.Add(uint64(0), uint64(math.MaxInt64), 100)
	f.Add(uint64(5*mib), uint64(math.MaxUint64/100+1), 0)
	f.Fuzz(func(t *testing.T, live, floor uint64, base int) {
		base = base % 100_000
		var p = heapfloor.Percent(live, floor, base)
		if base < 0 || floor == 0 {
			if p != base {
				t.Fatalf("Percent(%d, %d, %d) = %d, want base", live, floor, base, p)
			}
			return
		}
		if p < base {
			t.Fatalf("Percent(%d, %d, %d) = %d, below base", live, floor, base, p)
		}
		if p == base || p == math.MaxInt32 {
			return
		}
		// The goal p gives: live×(1+p/100), or Go's least, 4 MiB×p/100, for
		// a live heap below 4 MiB.
		var l = new(big.Int).SetUint64(max(live, 4*mib))
		var goal = new(big.Int).Mul(l, big.NewInt(int64(100+p)))
		if live < 4*mib {
			goal.Mul(l, big.NewInt(int64(p)))
		}
		goal.Quo(goal, big.NewInt(100))
		var fl = new(big.Int).SetUint64(floor)
		var slack = new(big.Int).Quo(l, big.NewInt(50)) // Rounding of the percent.
		var diff = new(big.Int).Sub(goal, fl)
		if diff.Abs(diff).Cmp(slack) > 0 {
			t.Fatalf("Percent(%d, %d, %d) = %d: a goal of %s bytes, want %d", live, floor, base, p, goal, floor)
		}
	})
}
