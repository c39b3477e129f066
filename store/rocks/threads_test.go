package rocks

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/linxGnu/grocksdb"
)

func TestFlushThreadsOf(t *testing.T) {
	for _, tc := range []struct{ procs, want int }{{1, 2}, {2, 2}, {3, 3}, {16, 16}} {
		if got := flushThreadsOf(tc.procs); got != tc.want {
			t.Errorf("flushThreadsOf(%d) = %d, want %d", tc.procs, got, tc.want)
		}
	}
}

// TestOpenSizesFlushThreads checks that a store's open leaves the process
// as many threads for flushes as Go has processors, and at least two.
func TestOpenSizesFlushThreads(t *testing.T) {
	var s, err = Open(filepath.Join(t.TempDir(), "s"), &nopRecorder{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	var env = grocksdb.NewDefaultEnv()
	defer env.Destroy()
	if got, want := env.GetHighPriorityBackgroundThreads(), max(runtime.GOMAXPROCS(0), 2); got < want {
		t.Errorf("the process has %d threads for its stores' flushes, want at least %d", got, want)
	}
}
