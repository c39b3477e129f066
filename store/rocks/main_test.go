package rocks

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/linxGnu/grocksdb"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// stack is the one devstack.Stack of this test process.
var stack *devstacktest.Stack

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild() // Never returns.
	}
	var code = func() int {
		var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		if stack, err = devstacktest.Start(ctx, devstacktest.Journals("rocks", numJournals, 1<<20)); err != nil {
			panic(err)
		}
		defer stack.Close()
		return m.Run()
	}()
	os.Exit(devstacktest.LeakChecked(code))
}

// numJournals is how many test journals the stack has.
const numJournals = 40

var nextJournal = 0

// newLog returns a fresh journal of the stack.
func newLog(t testing.TB) pb.Journal {
	nextJournal++
	if nextJournal > numJournals {
		return stack.NewJournal(t, "more-rocks", 1<<20) // Tests run again with go test -count=N.
	}
	return pb.Journal(fmt.Sprintf("rocks/%02d", nextJournal-1))
}

// recorded is a Store opened over a recovery log.
type recorded struct {
	store *Store
	rec   *recoverylog.Recorder
	dir   string
}

// smallTune makes RocksDB flush and compact often.
func smallTune(o *Options) {
	o.Tune = func(ro *grocksdb.Options) {
		ro.SetWriteBufferSize(64 << 10)
		ro.SetLevel0FileNumCompactionTrigger(2)
		ro.SetTargetFileSizeBase(64 << 10)
		ro.SetMaxBytesForLevelBase(256 << 10)
	}
}

// openRecorded plays journal into a new directory as author, fencing it, and
// opens a Store there recorded into the journal.
func openRecorded(t testing.TB, journal pb.Journal, author recoverylog.Author, o Options) *recorded {
	t.Helper()
	var rec, dir = playRecorder(t, journal, author)
	var s, err = Open(dir, rec, o)
	if err != nil {
		t.Fatal(err)
	}
	return &recorded{store: s, rec: rec, dir: dir}
}

// playRecorder plays journal into a new directory as author, fencing it, and
// returns a Recorder of the directory.
func playRecorder(t testing.TB, journal pb.Journal, author recoverylog.Author) (*recoverylog.Recorder, string) {
	t.Helper()
	var dir = t.TempDir()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var p = recoverylog.NewPlayer(stack.Journals(), journal, dir, author)
	p.FinishAtWriteHead()
	var fsm, err = p.Play(ctx, nil)
	if err != nil {
		t.Fatalf("Play %s: %v", journal, err)
	}
	var actx, acancel = context.WithCancel(context.Background())
	t.Cleanup(acancel)
	rec, err := recoverylog.NewRecorder(journal, fsm, author, dir, client.NewAppendService(actx, stack.Journals()))
	if err != nil {
		t.Fatal(err)
	}
	return rec, dir
}

func flushOpts() *grocksdb.FlushOptions {
	var o = grocksdb.NewDefaultFlushOptions()
	o.SetWait(true)
	return o
}

func rangeAll() grocksdb.Range { return grocksdb.Range{} }
