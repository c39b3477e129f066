package rocks

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// crashChildEnv, when set to "journal broker-address dir", makes the test
// binary run crashChild instead of its tests.
const crashChildEnv = "GAZCONSUMER_ROCKS_CRASH_CHILD"

const crashTxnKeys = 10

func crashKey(txn, j int) string { return fmt.Sprintf("t%06d/%02d", txn, j) }

// crashChild records a store into the journal, committing transactions until
// it's killed. It plays the log from the hints in its hints file, if there
// are any, as its author, and prints "opened on N write-ahead logs, kept K"
// (the logs its store's open kept rather than flushed: see wholeWAL), then
// "recovered N", N the transaction its checkpoint reads through (-1 for
// none). After each commit resolves it
// prints "committed N", and it always holds the next transaction's writes
// uncommitted. Every few commits it replaces its hints file with hints of
// the log, as a primary stores its hints. With "small", RocksDB flushes and
// compacts often; otherwise the store lives in its write-ahead log.
func crashChild() {
	var fail = func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	var args = strings.Fields(os.Getenv(crashChildEnv))
	var journal, addr, dir, hintsFile, tune = pb.Journal(args[0]), args[1], args[2], args[3], args[5]
	author, err := strconv.ParseUint(args[4], 16, 32)
	if err != nil {
		fail(err)
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err)
	}
	var jc = pb.NewRoutedJournalClient(pb.NewJournalClient(conn), pb.NoopDispatchRouter{})
	var ctx = context.Background()

	var hints *recoverylog.Hints
	if b, err := os.ReadFile(hintsFile); err == nil {
		hints = new(recoverylog.Hints)
		if err = proto.Unmarshal(b, hints); err != nil {
			fail(err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		fail(err)
	}
	var p = recoverylog.NewPlayer(jc, journal, dir, recoverylog.Author(author))
	p.FinishAtWriteHead()
	fsm, err := p.Play(ctx, hints)
	if err != nil {
		fail(err)
	}
	rec, err := recoverylog.NewRecorder(journal, fsm, recoverylog.Author(author), dir, client.NewAppendService(ctx, jc))
	if err != nil {
		fail(err)
	}
	var o Options
	if tune == "small" {
		smallTune(&o)
	}
	var logs, _ = filepath.Glob(filepath.Join(dir, "*.log"))
	s, err := Open(dir, rec, o)
	if err != nil {
		fail(err)
	}
	var kept = 0 // Logs the open kept (see wholeWAL), not flushed.
	for _, l := range logs {
		if _, err := os.Stat(l); err == nil {
			kept++
		}
	}
	fmt.Printf("opened on %d write-ahead logs, kept %d\n", len(logs), kept)
	cp, err := s.RestoreCheckpoint(nil)
	if err != nil {
		fail(err)
	}
	var from = int64(0)
	if src, ok := cp.Sources["source/a"]; ok {
		from = src.ReadThrough + 1
	}
	fmt.Printf("recovered %d\n", from-1)

	var value = []byte(strings.Repeat("value.", 200))
	for txn := int(from); ; txn++ {
		if txn%8 == 0 {
			go func() {
				var h, err = rec.Hints(ctx)
				if err != nil {
					fail(err)
				}
				b, err := proto.Marshal(h)
				if err != nil {
					fail(err)
				}
				var tmp = fmt.Sprintf("%s.%d", hintsFile, txn)
				if err = os.WriteFile(tmp, b, 0o600); err != nil {
					fail(err)
				} else if err = os.Rename(tmp, hintsFile); err != nil {
					fail(err)
				}
			}()
		}
		for j := range crashTxnKeys {
			if err = s.Put([]byte(crashKey(txn, j)), value); err != nil {
				fail(err)
			}
		}
		var op = s.StartCommit(nil, checkpointAt(int64(txn)), nil)
		<-op.Done()
		if err = op.Err(); err != nil {
			fail(err)
		}
		fmt.Printf("committed %d\n", txn)
	}
}

// startCrashChild starts crashChild in a process of its own, recording into
// journal from a new directory, as author, with the hints file hints and the
// tuning tune ("small", or the defaults), and returns the process and its
// output. The process is killed when t ends, if it's still running.
func startCrashChild(t *testing.T, journal pb.Journal, hints string, author recoverylog.Author, tune string) (*exec.Cmd, io.Reader) {
	t.Helper()
	var cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s %s %x %s", crashChildEnv, journal,
		stack.Brokers()[0].Endpoint().GRPCAddr(), t.TempDir(), hints, uint32(author), tune))
	cmd.Stderr = os.Stderr
	var out, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err = cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, out
}

// A process recording a store is killed with SIGKILL while committing;
// playing its log back yields every committed transaction through its last
// checkpoint, and nothing after it.
func TestCrashedProcessPlayback(t *testing.T) {
	var journal = newLog(t)
	var cmd, out = startCrashChild(t, journal, filepath.Join(t.TempDir(), "hints"), 0xC1, "small")
	var committed = -1
	var lines = bufio.NewScanner(out)
	var deadline = time.Now().Add(90 * time.Second)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "opened ") || !lines.Scan() || lines.Text() != "recovered -1" {
		t.Fatalf("child output %q; want it to recover an empty store", lines.Text())
	}
	for committed < 150 && lines.Scan() && time.Now().Before(deadline) {
		var n, err = strconv.Atoi(strings.TrimPrefix(lines.Text(), "committed "))
		if err != nil {
			t.Fatalf("child output %q", lines.Text())
		}
		committed = n
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if committed < 150 {
		t.Fatalf("child committed only through %d", committed)
	}

	var b = openRecorded(t, journal, 0xB2, Options{})
	defer b.store.Destroy()
	var through, keys = checkCrashed(t, b.store, committed)
	t.Logf("killed after commit %d; played back through %d; %d keys; level-0/1 files %s/%s", committed, through,
		keys, b.store.DB().GetProperty("rocksdb.num-files-at-level0"), b.store.DB().GetProperty("rocksdb.num-files-at-level1"))
}

// checkCrashed checks that s, played back from the log of crashChild
// processes, holds every transaction through its checkpoint's, committed
// or later, and nothing after it, and returns its checkpoint's transaction
// and how many keys it holds.
func checkCrashed(t *testing.T, s *Store, committed int) (through int64, keys int) {
	t.Helper()
	through = readThrough(t, s)
	if through < int64(committed) {
		t.Fatalf("played-back checkpoint reads through %d, but transaction %d committed", through, committed)
	}
	var got = contents(t, s)
	for txn := 0; txn <= int(through); txn++ {
		for j := range crashTxnKeys {
			if _, ok := got[crashKey(txn, j)]; !ok {
				t.Fatalf("committed key %s is missing", crashKey(txn, j))
			}
		}
	}
	if want := (int(through) + 1) * crashTxnKeys; len(got) != want {
		t.Fatalf("played-back store holds %d keys, want %d (through txn %d)", len(got), want, through)
	}
	return through, len(got)
}

// Processes recording a store, one after another over one log as a shard's
// primaries do, are killed with SIGKILL at random moments: while playing the
// log, while RocksDB opens (replaying its write-ahead log, flushing it, and
// writing a new manifest), and while committing. Each plays the log from
// the hints its predecessors stored last, and recovers every transaction
// they committed: a checkpoint never goes back. Half the processes keep the
// store in the write-ahead log, half flush and compact often.
func TestChainedCrashesNeverLoseACommit(t *testing.T) {
	var seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("ROCKS_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (set ROCKS_CRASH_SEED to repeat)", seed)
	var rng = rand.New(rand.NewPCG(seed, 7))
	var journal = newLog(t)
	var hints = filepath.Join(t.TempDir(), "hints")
	const generations = 12

	var committed, recovered = -1, 0
	for g := range generations {
		var tune = []string{"small", "large"}[rng.IntN(2)]
		// Most die early, while they recover or just after; others once
		// they committed a while. The first builds a large write-ahead
		// log, for the next to recover.
		var after = time.Duration(rng.Int64N(int64(time.Second)))
		if rng.IntN(3) == 0 {
			after = time.Second + time.Duration(rng.Int64N(int64(time.Second)))
		}
		if g == 0 {
			tune, after = "large", time.Second
		}
		var cmd, out = startCrashChild(t, journal, hints, recoverylog.Author(0xD0+g), tune)
		var timer = time.AfterFunc(after, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })

		var lines = bufio.NewScanner(out)
		recovered = -1
		var opened = "not opened"
		for lines.Scan() {
			var line = lines.Text()
			if strings.HasPrefix(line, "opened ") {
				opened = line
			} else if n, err := strconv.Atoi(strings.TrimPrefix(line, "committed ")); err == nil {
				committed = max(committed, n)
			} else if n, err := strconv.Atoi(strings.TrimPrefix(line, "recovered ")); err == nil {
				if n < committed {
					t.Fatalf("process %d (%s) recovered through transaction %d, but transaction %d committed", g, tune, n, committed)
				}
				recovered = n
			} else {
				t.Fatalf("process %d: child output %q", g, line)
			}
		}
		_ = cmd.Wait()
		timer.Stop()
		t.Logf("process %d (%s) killed %s after it started: %s; recovered through %d (-1: none, or not yet), then committed through %d",
			g, tune, after.Round(time.Millisecond), opened, recovered, committed)
	}

	var b = openRecorded(t, journal, 0xB2, Options{})
	defer b.store.Destroy()
	checkCrashed(t, b.store, committed)
}
