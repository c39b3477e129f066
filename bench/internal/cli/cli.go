// Package cli holds what the benchmark's recovery commands share: their
// flags, and the size of a store's files.
package cli

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gazconsumer/gazconsumer/bench/internal/benchstate"
)

// Flags of a recovery command: `CMD build|play [flags]`.
type Flags struct {
	Broker string
	Log    string
	Dir    string
	Hints  string
	Check  bool
	State  benchstate.State
}

// Parse parses the command's arguments, args[0] being build or play.
func Parse(name string, args []string) (mode string, f Flags, err error) {
	var fs = flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(&f.Broker, "broker", "", "broker endpoint")
	fs.StringVar(&f.Log, "log", "", "recovery log journal")
	fs.StringVar(&f.Dir, "dir", "", "directory of the store: built, or played into")
	fs.StringVar(&f.Hints, "hints", "", "file of the hints: written by build, read by play")
	fs.BoolVar(&f.Check, "check", false, "play: check every key and value of the played store")
	fs.IntVar(&f.State.Keys, "keys", 1_000_000, "distinct keys")
	fs.IntVar(&f.State.ValueLen, "value", 1024, "bytes of each value")
	fs.IntVar(&f.State.TxnLen, "txn", 1000, "build: Puts per transaction")
	fs.Float64Var(&f.State.Rewrites, "rewrites", 0.25, "build: fraction of further Puts which rewrite existing keys")
	if len(args) == 0 || (args[0] != "build" && args[0] != "play") {
		return "", f, fmt.Errorf("usage: %s build|play [flags]", name)
	}
	if err = fs.Parse(args[1:]); err != nil {
		return "", f, err
	}
	if f.Broker == "" || f.Log == "" || f.Dir == "" || f.Hints == "" {
		return "", f, fmt.Errorf("%s %s: -broker, -log, -dir and -hints are required", name, args[0])
	}
	if f.Dir, err = filepath.Abs(f.Dir); err != nil {
		return "", f, err
	}
	return args[0], f, nil
}

// DirBytes is the total size of the regular files under dir.
func DirBytes(dir string) (int64, error) {
	var n int64
	var err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		var info, ierr = d.Info()
		if ierr == nil {
			n += info.Size()
		}
		return ierr
	})
	return n, err
}

// Fatal prints err and exits.
func Fatal(name string, err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	os.Exit(1)
}
