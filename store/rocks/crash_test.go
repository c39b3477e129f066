package rocks

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
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
)

// crashChildEnv, when set to "journal broker-address dir", makes the test
// binary run crashChild instead of its tests.
const crashChildEnv = "GAZCONSUMER_ROCKS_CRASH_CHILD"

const crashTxnKeys = 10

func crashKey(txn, j int) string { return fmt.Sprintf("t%06d/%02d", txn, j) }

// crashChild records a store into the journal, committing transactions until
// it's killed. After each commit resolves it prints "committed N", and it
// always holds the next transaction's writes uncommitted.
func crashChild() {
	var fail = func(err error) {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	var args = strings.Fields(os.Getenv(crashChildEnv))
	var journal, addr, dir = pb.Journal(args[0]), args[1], args[2]
	var conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fail(err)
	}
	var jc = pb.NewRoutedJournalClient(pb.NewJournalClient(conn), pb.NoopDispatchRouter{})
	var ctx = context.Background()

	var p = recoverylog.NewPlayer(jc, journal, dir, 0xC1)
	p.FinishAtWriteHead()
	fsm, err := p.Play(ctx, nil)
	if err != nil {
		fail(err)
	}
	rec, err := recoverylog.NewRecorder(journal, fsm, 0xC1, dir, client.NewAppendService(ctx, jc))
	if err != nil {
		fail(err)
	}
	var o Options
	smallTune(&o)
	s, err := Open(dir, rec, o)
	if err != nil {
		fail(err)
	}
	var value = []byte(strings.Repeat("value.", 200))
	for txn := 0; ; txn++ {
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

// A process recording a store is killed with SIGKILL while committing;
// playing its log back yields every committed transaction through its last
// checkpoint, and nothing after it.
func TestCrashedProcessPlayback(t *testing.T) {
	var journal = newLog(t)
	var cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %s",
		crashChildEnv, journal, stack.Brokers()[0].Endpoint().GRPCAddr(), t.TempDir()))
	cmd.Stderr = os.Stderr
	var out, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err = cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var committed = -1
	var lines = bufio.NewScanner(out)
	var deadline = time.Now().Add(90 * time.Second)
	for committed < 150 && lines.Scan() && time.Now().Before(deadline) {
		var n, err = strconv.Atoi(strings.TrimPrefix(lines.Text(), "committed "))
		if err != nil {
			t.Fatalf("child output %q", lines.Text())
		}
		committed = n
	}
	if err = cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if committed < 150 {
		t.Fatalf("child committed only through %d", committed)
	}

	var b = openRecorded(t, journal, 0xB2, Options{})
	defer b.store.Destroy()
	var through = readThrough(t, b.store)
	if through < int64(committed) {
		t.Fatalf("played-back checkpoint reads through %d, but the child committed %d", through, committed)
	}
	var got = contents(t, b.store)
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
	t.Logf("killed after commit %d; played back through %d; %d keys; level-0/1 files %s/%s", committed, through,
		len(got), b.store.DB().GetProperty("rocksdb.num-files-at-level0"), b.store.DB().GetProperty("rocksdb.num-files-at-level1"))
}
