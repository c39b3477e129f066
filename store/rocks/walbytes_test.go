package rocks

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWALBytesIn counts the bytes of a directory's write-ahead logs, which
// an open replays, and nothing else: not RocksDB's info log (LOG), nor
// tables, nor a directory.
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
	if got := walBytesIn(filepath.Join(dir, "missing")); got != 0 {
		t.Fatalf("walBytesIn of a missing directory is %d, want 0", got)
	}
}
