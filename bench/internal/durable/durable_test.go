package durable

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSyncTreeAndWriteFile(t *testing.T) {
	var dir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a", "b"), 0o700); err != nil {
		t.Fatal(err)
	}
	write, sync, err := WriteFile(filepath.Join(dir, "a", "b", "f"), 10<<20+3)
	if err != nil {
		t.Fatal(err)
	} else if write <= 0 || sync <= 0 {
		t.Fatalf("write %v, sync %v: want both timed", write, sync)
	}
	if info, err := os.Stat(filepath.Join(dir, "a", "b", "f")); err != nil || info.Size() != 10<<20+3 {
		t.Fatalf("the written file: %v, %v; want %d bytes", info, err, 10<<20+3)
	}
	if err = os.WriteFile(filepath.Join(dir, "g"), []byte("g"), 0o600); err != nil {
		t.Fatal(err)
	}
	if d, err := SyncTree(dir); err != nil || d <= 0 {
		t.Fatalf("SyncTree: %v, %v", d, err)
	}
	if _, err = SyncTree(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("SyncTree of a missing directory succeeded")
	}
}
