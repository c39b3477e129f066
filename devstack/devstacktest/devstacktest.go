// Package devstacktest starts devstack.Stacks for tests, with journals made
// to order, and checks that tests leave no goroutine behind.
package devstacktest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/specs"
	pb "go.gazette.dev/core/broker/protocol"
	"go.uber.org/goleak"
)

// LeakOptions ignore the goroutines that libraries start once per process
// and never stop. Everything a Stack starts must be gone after Close.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		goleak.IgnoreTopFunction("github.com/golang/glog.(*fileSink).flushDaemon"),
		goleak.IgnoreTopFunction("github.com/golang/glog.(*loggingT).flushDaemon"),
	}
}

// FindLeaks reports the goroutines still running beyond those LeakOptions
// ignore.
func FindLeaks() error { return goleak.Find(LeakOptions()...) }

// LeakChecked returns code, the exit code of a TestMain's tests, or 1 if
// they passed and left goroutines running (FindLeaks), which it prints.
func LeakChecked(code int) int {
	if code == 0 {
		if err := FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// LogLevel is slog.LevelWarn, or the level named by the environment
// variable GAZCONSUMER_TEST_LOG (which also sets slog's default logger's).
func LogLevel() slog.Level {
	var l = slog.LevelWarn
	if v := os.Getenv("GAZCONSUMER_TEST_LOG"); v != "" {
		_ = l.UnmarshalText([]byte(v))
		slog.SetLogLoggerLevel(l)
	}
	return l
}

// Options are the Options of a test stack in dir: no fsyncs, short leases,
// quiet logs.
func Options(dir string) devstack.Options {
	return devstack.Options{Dir: dir, UnsafeNoFsync: true, LeaseTTL: 5 * time.Second, LogLevel: LogLevel()}
}

// Journals returns the YAML of n journals prefix/00, prefix/01, ... with
// replication 1, uncompressed fragments of fragmentLength bytes persisted
// to the stack's file:// store, and labels (name=value pairs).
func Journals(prefix string, n int, fragmentLength int64, labels ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "name: %s/\nreplication: 1\n", prefix)
	if len(labels) != 0 {
		b.WriteString("labels:\n")
		for _, l := range labels {
			var name, value, _ = strings.Cut(l, "=")
			fmt.Fprintf(&b, "  - name: %s\n    value: %q\n", name, value)
		}
	}
	fmt.Fprintf(&b, "fragment:\n  length: %d\n  stores: [file:///]\n  refresh_interval: 1s\n  compression_codec: NONE\nchildren:\n", fragmentLength)
	for i := range n {
		fmt.Fprintf(&b, "  - name: %s/%02d\n", prefix, i)
	}
	return b.String()
}

// Start starts a stack with Options in a new temporary directory and
// applies journalsYAML, if not empty. Close removes the directory.
func Start(ctx context.Context, journalsYAML string) (*Stack, error) {
	var dir, err = os.MkdirTemp("", "devstacktest-")
	if err != nil {
		return nil, err
	}
	s, err := devstack.Start(ctx, Options(dir))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if journalsYAML != "" {
		if _, err = specs.ApplyJournals(ctx, s.Journals(), "test journals", []byte(journalsYAML)); err != nil {
			s.Close()
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return &Stack{Stack: s}, nil
}

// Stack is a test stack which removes its directory on Close.
type Stack struct {
	*devstack.Stack

	mu    sync.Mutex
	names map[string]int // Runs of each name Name gave.
}

// Name returns base the first time it's asked for base, and base-2, base-3
// and so on after: a test which names the journals, shards or consumer
// groups it makes in a stack its package's tests share by Name makes them
// anew when it runs again in the same process (go test -count=N), rather
// than failing on (or reading) what its last run left there.
func (s *Stack) Name(base string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.names == nil {
		s.names = make(map[string]int)
	}
	s.names[base]++
	if n := s.names[base]; n != 1 {
		return fmt.Sprintf("%s-%d", base, n)
	}
	return base
}

// NewJournal applies a journal of Journals' settings, with fragments of
// fragmentLength bytes, named by Name(prefix) + "/00", and returns its
// name; it fails t if it can't.
func (s *Stack) NewJournal(t testing.TB, prefix string, fragmentLength int64) pb.Journal {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix = s.Name(prefix)
	if _, err := specs.ApplyJournals(ctx, s.Journals(), "test journal "+prefix, []byte(Journals(prefix, 1, fragmentLength))); err != nil {
		t.Fatal(err)
	}
	return pb.Journal(prefix + "/00")
}

// Close closes the stack and removes its directory.
func (s *Stack) Close() error {
	var err = s.Stack.Close()
	os.RemoveAll(s.Dir())
	return err
}

// StartT is Start for one test: it fails t if the stack cannot start, and
// closes the stack when t ends.
func StartT(t testing.TB, journalsYAML string) *Stack {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var s, err = Start(ctx, journalsYAML)
	if err != nil {
		t.Fatalf("starting a test stack: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the test stack: %v", err)
		}
	})
	return s
}

// Run is the body of a TestMain whose tests share one stack: it starts a
// stack of journalsYAML, sets *stack to it, runs m's tests, closes the
// stack and, if the tests passed, fails them for goroutines they leaked. It
// returns the exit code for os.Exit.
func Run(m *testing.M, journalsYAML string, stack **Stack) int {
	slog.SetLogLoggerLevel(LogLevel())
	var code = func() int {
		var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		if *stack, err = Start(ctx, journalsYAML); err != nil {
			fmt.Fprintln(os.Stderr, "starting a test stack:", err)
			return 1
		}
		defer (*stack).Close()
		return m.Run()
	}()
	return LeakChecked(code)
}
