package rocks

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// walBytesIn returns the bytes of the write-ahead logs in dir, which an
// open of the database there replays (0 if it can't be read), without
// reading them as wholeWALs does: the tests' and benchmarks' measure of a
// store's logs as they write them.
func walBytesIn(dir string) int64 {
	var entries, _ = os.ReadDir(dir)
	var n int64
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".log") {
			if info, err := e.Info(); err == nil {
				n += info.Size()
			}
		}
	}
	return n
}

// TestWALBytesIn counts the bytes of a directory's write-ahead logs, which
// an open replays (the bytes wholeWALs gives, and walBytesIn), and nothing
// else: not RocksDB's info log (LOG), nor tables, nor a directory.
func TestWALBytesIn(t *testing.T) {
	var dir = t.TempDir()
	for name, n := range map[string]int{"000004.log": 10, "000009.log": 7, "LOG": 5, "LOG.old.1": 3, "000005.sst": 100, "MANIFEST-000001": 20} {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, n), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "x.log"), 0o700); err != nil {
		t.Fatal(err)
	}
	if got := walBytesIn(dir); got != 17 {
		t.Fatalf("walBytesIn is %d, want 17", got)
	}
	if got, whole := wholeWALs(dir); got != 17 || whole {
		t.Fatalf("wholeWALs is %d bytes, whole %t; want 17, not whole (logs of zeros)", got, whole)
	}
	if got := walBytesIn(filepath.Join(dir, "missing")); got != 0 {
		t.Fatalf("walBytesIn of a missing directory is %d, want 0", got)
	}
	if got, whole := wholeWALs(filepath.Join(dir, "missing")); got != 0 || whole {
		t.Fatalf("wholeWALs of a missing directory is %d bytes, whole %t; want 0, not whole", got, whole)
	}
}
