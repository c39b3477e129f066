package recoverylog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// stack is the one devstack.Stack of this test process.
var stack *devstacktest.Stack

func TestMain(m *testing.M) {
	var code = m.Run()
	if stack != nil {
		if err := stack.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "closing stack:", err)
			code = 1
		}
	}
	os.Exit(devstacktest.LeakChecked(code))
}

// needStack starts the process's stack, with test journals, on first use.
// Fuzz workers, which need none, don't start it.
func needStack(t testing.TB) {
	t.Helper()
	if stack != nil {
		return
	}
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if stack, err = devstacktest.Start(ctx, devstacktest.Journals("logs", numJournals, 65536)); err != nil {
		t.Fatal(err)
	}
}

// numJournals is how many test journals the stack has.
const numJournals = 40

var nextJournal = 0

// newLog returns a fresh journal of the stack: one of those it started
// with, then (tests run again with go test -count=N) a new one.
func newLog(t testing.TB) pb.Journal {
	needStack(t)
	nextJournal++
	if nextJournal <= numJournals {
		return pb.Journal(fmt.Sprintf("logs/%02d", nextJournal-1))
	}
	return stack.NewJournal(t, "more-logs", 65536)
}

// play plays journal from hints into a new directory, finishing at the write
// head for author.
func play(t testing.TB, journal pb.Journal, hints *Hints, author Author) (*FSM, string, *Player) {
	t.Helper()
	var dir = t.TempDir()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var p = NewPlayer(stack.Journals(), journal, dir, author)
	p.FinishAtWriteHead()
	var fsm, err = p.Play(ctx, hints)
	if err != nil {
		t.Fatalf("Play %s: %v", journal, err)
	}
	return fsm, dir, p
}

// mirror performs file operations on a directory and records them.
type mirror struct {
	t   testing.TB
	dir string
	rec *Recorder
	fns map[string]Fnode
}

// newMirror plays journal into a new directory as author, and records into it.
func newMirror(t testing.TB, journal pb.Journal, hints *Hints, author Author) *mirror {
	t.Helper()
	var fsm, dir, _ = play(t, journal, hints, author)
	var ctx, cancel = context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var rec, err = NewRecorder(journal, fsm, author, dir, client.NewAppendService(ctx, stack.Journals()))
	if err != nil {
		t.Fatal(err)
	}
	return &mirror{t: t, dir: dir, rec: rec, fns: make(map[string]Fnode)}
}

func (m *mirror) path(name string) string { return filepath.Join(m.dir, name) }

func (m *mirror) check(err error) {
	m.t.Helper()
	if err != nil {
		m.t.Fatal(err)
	}
}

func (m *mirror) create(name string) {
	m.t.Helper()
	m.check(os.MkdirAll(filepath.Dir(m.path(name)), 0o755))
	m.check(os.WriteFile(m.path(name), nil, 0o644))
	var fn, err = m.rec.NewWritableFile(m.path(name))
	m.check(err)
	m.fns[name] = fn
}

func (m *mirror) write(name string, data []byte, offset int64) {
	m.t.Helper()
	var f, err = os.OpenFile(m.path(name), os.O_WRONLY, 0)
	m.check(err)
	if offset < 0 {
		var st, _ = f.Stat()
		_, err = f.WriteAt(data, st.Size())
		m.check(err)
		m.check(m.rec.Append(m.fns[name], data))
	} else {
		_, err = f.WriteAt(data, offset)
		m.check(err)
		m.check(m.rec.PositionedAppend(m.fns[name], data, offset))
	}
	m.check(f.Close())
}

func (m *mirror) rename(src, dst string) {
	m.t.Helper()
	m.check(os.MkdirAll(filepath.Dir(m.path(dst)), 0o755))
	m.check(os.Rename(m.path(src), m.path(dst)))
	m.check(m.rec.Rename(src, dst))
	if fn, ok := m.fns[src]; ok {
		m.fns[dst] = fn
		delete(m.fns, src)
	} else {
		delete(m.fns, dst)
	}
}

func (m *mirror) link(src, dst string) {
	m.t.Helper()
	m.check(os.MkdirAll(filepath.Dir(m.path(dst)), 0o755))
	m.check(os.Link(m.path(src), m.path(dst)))
	m.check(m.rec.Link(src, dst))
	m.fns[dst] = m.fns[src]
}

func (m *mirror) remove(name string) {
	m.t.Helper()
	m.check(os.Remove(m.path(name)))
	m.check(m.rec.Delete(name))
	delete(m.fns, name)
}

func (m *mirror) property(name string, content []byte) {
	m.t.Helper()
	m.check(os.MkdirAll(filepath.Dir(m.path(name)), 0o755))
	m.check(os.WriteFile(m.path(name), content, 0o644))
	m.check(m.rec.SetProperty(name, content))
	delete(m.fns, name)
}

func (m *mirror) hints() *Hints {
	m.t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var h, err = m.rec.Hints(ctx)
	m.check(err)
	if got, want := m.rec.Stats(), StatsOf(h); got != want {
		m.t.Fatalf("the recorder's stats are %+v, its hints' %+v", got, want)
	}
	return h
}

// tree returns the regular files under dir and their content.
func tree(t testing.TB, dir string) map[string][]byte {
	t.Helper()
	var out = make(map[string][]byte)
	var err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var rel, _ = filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree fails t unless dirs want and got hold identical files.
func sameTree(t testing.TB, want, got string) {
	t.Helper()
	var w, g = tree(t, want), tree(t, got)
	for name, b := range w {
		if gb, ok := g[name]; !ok {
			t.Errorf("played directory lacks %s", name)
		} else if !bytes.Equal(b, gb) {
			t.Errorf("played %s differs: %d bytes, want %d", name, len(gb), len(b))
		}
	}
	for name := range g {
		if _, ok := w[name]; !ok {
			t.Errorf("played directory has extra file %s", name)
		}
	}
	if len(w) == 0 {
		t.Error("source directory is empty: test is vacuous")
	}
}

func writeHead(t testing.TB, journal pb.Journal) int64 {
	t.Helper()
	var resp, err = client.Append(context.Background(), stack.Journals(), pb.AppendRequest{Journal: journal})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Commit.End
}

func isRegisterMismatch(err error) bool { return errors.Is(err, client.ErrRegisterMismatch) }

func writeFile(name string, b []byte) error { return os.WriteFile(name, b, 0o644) }
