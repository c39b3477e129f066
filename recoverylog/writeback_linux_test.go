//go:build linux

package recoverylog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The kernel begins the writeback of a regular file's pages; a file which
// has none to write back (a pipe) is declined as unsupported, not failed.
func TestStartWriteback(t *testing.T) {
	var f, err = os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err = f.Write(make([]byte, 3<<20)); err != nil {
		t.Fatal(err)
	}
	if err = startWriteback(f); err != nil {
		t.Fatalf("writeback of a regular file: %v", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err = startWriteback(w); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("writeback of a pipe: %v, want errors.ErrUnsupported", err)
	}
}
