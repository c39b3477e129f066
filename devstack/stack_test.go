package devstack_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/specs"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("DEVSTACK_CRASH_CHILD_DIR"); dir != "" {
		crashChild(dir)
		return
	}
	goleak.VerifyTestMain(m, devstacktest.LeakOptions()...)
}

// crashChild is the process that TestAcknowledgedAppendsSurviveSIGKILL
// kills: it runs a stack on dir, appends lines to its journals as fast as
// they are acknowledged, and prints each line once acknowledged, until it
// is killed.
func crashChild(dir string) {
	var ctx = context.Background()
	var s, err = devstack.Start(ctx, devstack.Options{Dir: dir, Brokers: 2, LogLevel: slog.LevelError})
	if err != nil {
		fmt.Println("start:", err)
		os.Exit(1)
	}
	if _, err = specs.ApplyJournalsFile(ctx, s.Journals(), "testdata/journals.yaml"); err != nil {
		fmt.Println("apply:", err)
		os.Exit(1)
	}
	// A reader of each journal prints how far it read, with a checksum of
	// what it read: what a reader read must survive as well.
	var out sync.Mutex
	for _, journal := range []pb.Journal{"tests/one", "tests/two"} {
		go func() {
			var rr = client.NewRetryReader(ctx, s.Journals(), pb.ReadRequest{Journal: journal, Block: true})
			var crc uint32
			var buf = make([]byte, 4096)
			for {
				var n, err = rr.Read(buf)
				if n != 0 {
					crc = crc32.Update(crc, crc32.IEEETable, buf[:n])
					out.Lock()
					fmt.Printf("read %s %d %d\n", journal, rr.Offset(), crc)
					out.Unlock()
				}
				if err != nil && !errors.Is(err, client.ErrOffsetNotYetAvailable) {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	var ajc = client.NewAppendService(ctx, s.Journals())
	for i := 0; ; i++ {
		var journal = []pb.Journal{"tests/one", "tests/two"}[i%2]
		var line = fmt.Sprintf("line %d of %s\n", i, journal)
		var aa = ajc.StartAppend(pb.AppendRequest{Journal: journal}, nil)
		_, _ = aa.Writer().WriteString(line)
		if err = aa.Release(); err == nil {
			err = aa.Err()
		}
		if err != nil {
			fmt.Println("append:", err)
			os.Exit(1)
		}
		out.Lock()
		fmt.Print("acknowledged ", line) // Only once the append is.
		out.Unlock()
	}
}

func start(t *testing.T, dir string, brokers int) *devstack.Stack {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var s, err = devstack.Start(ctx, devstack.Options{
		Dir:           dir,
		Brokers:       brokers,
		UnsafeNoFsync: true,
		LeaseTTL:      5 * time.Second,
		LogLevel:      devstacktest.LogLevel(),
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return s
}

func applyYAML(t *testing.T, jc pb.JournalClient, yaml string) {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := specs.ApplyJournals(ctx, jc, "inline.yaml", []byte(yaml)); err != nil {
		t.Fatalf("ApplyJournals: %v", err)
	}
}

func applyFile(t *testing.T, jc pb.JournalClient, path string) {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := specs.ApplyJournalsFile(ctx, jc, path); err != nil {
		t.Fatalf("ApplyJournalsFile: %v", err)
	}
}

func appendTo(t *testing.T, jc pb.RoutedJournalClient, journal pb.Journal, data string) {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		var _, err = client.Append(ctx, jc, pb.AppendRequest{Journal: journal}, strings.NewReader(data))
		if err == nil {
			return
		} else if !errors.Is(err, client.ErrJournalNotFound) || ctx.Err() != nil {
			t.Fatalf("Append to %s: %v", journal, err)
		}
		// A journal just applied: the broker asked hasn't seen it yet.
		time.Sleep(20 * time.Millisecond)
	}
}

// readN reads exactly n bytes of journal from offset 0, blocking for them.
func readN(t *testing.T, jc pb.RoutedJournalClient, journal pb.Journal, n int) string {
	t.Helper()
	return readNWithin(t, jc, journal, n, 30*time.Second)
}

// readNWithin is readN, waiting up to d.
func readNWithin(t *testing.T, jc pb.RoutedJournalClient, journal pb.Journal, n int, d time.Duration) string {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), d)
	defer cancel()
	var rr = client.NewRetryReader(ctx, jc, pb.ReadRequest{Journal: journal, Block: true})
	var buf = make([]byte, n)
	if _, err := io.ReadFull(rr, buf); err != nil {
		t.Fatalf("reading %d bytes of %s: %v", n, journal, err)
	}
	return string(buf)
}

// writeHead returns the journal's write head through a non-blocking read.
func writeHead(t *testing.T, jc pb.RoutedJournalClient, journal pb.Journal) int64 {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var r = client.NewReader(ctx, jc, pb.ReadRequest{Journal: journal, Offset: -1, Block: false})
	var _, err = r.Read(nil)
	if err != nil && !errors.Is(err, client.ErrOffsetNotYetAvailable) {
		t.Fatalf("reading head of %s: %v", journal, err)
	}
	return r.Response.WriteHead
}

func TestStartAppendReadClose(t *testing.T) {
	var s = start(t, t.TempDir(), 1)
	applyFile(t, s.Journals(), "testdata/journals.yaml")

	appendTo(t, s.Journals(), "tests/one", "hello\n")
	appendTo(t, s.Journals(), "tests/one", "world\n")
	if got := readN(t, s.Journals(), "tests/one", 12); got != "hello\nworld\n" {
		t.Fatalf("read back %q", got)
	}
	if got := writeHead(t, s.Journals(), "tests/two"); got != 0 {
		t.Fatalf("tests/two write head = %d, want 0", got)
	}
	if !strings.HasPrefix(s.EtcdURL(), "http://127.0.0.1:") {
		t.Fatalf("etcd URL %q is not on loopback", s.EtcdURL())
	}
	// Clients which sync their endpoints (as Gazette's consumers do) use
	// the URLs etcd advertises: they must be the one it serves.
	if members, err := s.Etcd().MemberList(context.Background()); err != nil {
		t.Fatal(err)
	} else if got := members.Members[0].ClientURLs; len(got) != 1 || got[0] != s.EtcdURL() {
		t.Fatalf("etcd advertises client URLs %q, not %q", got, s.EtcdURL())
	}
	// Writes outside the stack's prefix (a consumer's, say) while it
	// closes: the persister never sees them, and Close must not wait for it.
	var stop = make(chan struct{})
	var writing sync.WaitGroup
	writing.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var ctx, cancel = context.WithTimeout(context.Background(), time.Second)
			_, _ = s.Etcd().Put(ctx, fmt.Sprintf("/gazette/consumers/other/%d", i%10), "x")
			cancel()
		}
	})
	time.Sleep(20 * time.Millisecond)
	var err = s.Close()
	close(stop)
	writing.Wait()
	if err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestRestartKeepsSpecsAndData(t *testing.T) {
	var dir = t.TempDir()
	var s = start(t, dir, 1)
	applyFile(t, s.Journals(), "testdata/journals.yaml")
	var want = strings.Repeat("persisted across restarts\n", 100)
	appendTo(t, s.Journals(), "tests/two", want)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = start(t, dir, 1)
	defer s.Close()

	var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var list, err = client.ListAllJournals(ctx, s.Journals(), pb.ListRequest{})
	if err != nil {
		t.Fatalf("ListAllJournals: %v", err)
	}
	if len(list.Journals) != 2 {
		t.Fatalf("after restart, %d journals listed; want 2", len(list.Journals))
	}
	if got := readN(t, s.Journals(), "tests/two", len(want)); got != want {
		t.Fatalf("after restart, read back %d bytes that differ", len(got))
	}
	// The journal remains writable, from the persisted write head on.
	appendTo(t, s.Journals(), "tests/two", "after\n")
	if got := readN(t, s.Journals(), "tests/two", len(want)+6); got != want+"after\n" {
		t.Fatalf("after restart and append, read back %q", got[len(want):])
	}
}

// With three brokers and replication 2, a journal survives the loss of any
// one broker: Gazette appends only with the desired number of replicas, so a
// third broker must be there to take the lost one's place.
func TestReplicatedJournalSurvivesBrokerLoss(t *testing.T) {
	for _, how := range []string{"Kill", "Close"} {
		t.Run(how, func(t *testing.T) {
			var s = start(t, t.TempDir(), 3)
			defer s.Close()

			applyYAML(t, s.Journals(), `
name: replicated/
replication: 2
fragment:
  length: 1048576
  stores: [file:///]
  refresh_interval: 1s
  compression_codec: NONE
children:
  - name: replicated/journal
`)
			const journal = pb.Journal("replicated/journal")
			appendTo(t, s.Journals(), journal, "before\n")

			// Lose the journal's primary; keep talking through a broker outside its route.
			var route = routeOf(t, s.Journals(), journal)
			var lost, kept *devstack.Broker
			for _, b := range s.Brokers() {
				if b.ID() == route.Members[route.Primary] {
					lost = b
				} else if !slices.Contains(route.Members, b.ID()) || kept == nil {
					kept = b
				}
			}
			var err error
			if how == "Kill" {
				err = lost.Kill()
			} else {
				err = lost.Close()
			}
			if err != nil {
				t.Fatalf("%s broker %s: %v", how, lost.ID().Suffix, err)
			}

			var jc, conn, dialErr = devstack.DialJournals(kept.Endpoint())
			if dialErr != nil {
				t.Fatal(dialErr)
			}
			defer conn.Close()

			appendTo(t, jc, journal, "after\n")
			// If the broker that replaces the lost one became the primary,
			// "before" is in no spool of it: it's read once the surviving
			// replica persists the fragment holding it, which its broker,
			// not the primary, queues for its persister's next ticks, a
			// minute apart, retried up to three times (CI: the read of a
			// run under -race timed out after 30 s).
			if got := readNWithin(t, jc, journal, 13, 5*time.Minute); got != "before\nafter\n" {
				t.Fatalf("after losing broker %s, read back %q", lost.ID().Suffix, got)
			}
			if route = routeOf(t, jc, journal); slices.Contains(route.Members, lost.ID()) || len(route.Members) != 2 {
				t.Fatalf("after losing broker %s, route is %s", lost.ID().Suffix, route.String())
			}
		})
	}
}

func routeOf(t *testing.T, jc pb.RoutedJournalClient, journal pb.Journal) pb.Route {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var list, err = client.ListAllJournals(ctx, jc, pb.ListRequest{
		Selector: pb.LabelSelector{Include: pb.MustLabelSet("name", journal.String())},
	})
	if err != nil || len(list.Journals) != 1 {
		t.Fatalf("listing %s: %v (%d journals)", journal, err, len(list.Journals))
	}
	return list.Journals[0].Route
}

func TestOneStackPerProcess(t *testing.T) {
	var s = start(t, t.TempDir(), 1)
	defer s.Close()

	var _, err = devstack.Start(context.Background(), devstack.Options{Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("second Start: got %v, want an error saying a Stack is already running", err)
	}
}

// A port chosen for etcd may be taken by another process before etcd binds
// it: Start chooses another.
func TestStartRetriesATakenEtcdPort(t *testing.T) {
	var taken, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var takenPort = taken.Addr().(*net.TCPAddr).Port

	var calls int
	defer devstack.SetChooseEtcdPort(func() (int, error) {
		if calls++; calls == 1 {
			return takenPort, nil
		}
		var l, err = net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port, nil
	})()

	var s = start(t, t.TempDir(), 1)
	defer s.Close()
	if calls != 2 || strings.HasSuffix(s.EtcdEndpoint(), ":"+strconv.Itoa(takenPort)) {
		t.Fatalf("etcd listens on %s after %d choices; want a second port, not the taken %d", s.EtcdEndpoint(), calls, takenPort)
	}
}

func TestStartNeedsDir(t *testing.T) {
	var _, err = devstack.Start(context.Background(), devstack.Options{})
	if err == nil || !strings.Contains(err.Error(), "Dir") {
		t.Fatalf("Start without Dir: got %v", err)
	}
}

func TestFragmentsPersistToDir(t *testing.T) {
	var dir = t.TempDir()
	var s = start(t, dir, 1)
	applyFile(t, s.Journals(), "testdata/journals.yaml")
	appendTo(t, s.Journals(), "tests/one", "on disk\n")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var entries, err = os.ReadDir(dir + "/fragments/tests/one")
	if err != nil {
		t.Fatalf("reading fragment directory: %v", err)
	}
	var found bool
	for _, e := range entries {
		var b, _ = os.ReadFile(dir + "/fragments/tests/one/" + e.Name())
		found = found || bytes.Contains(b, []byte("on disk\n"))
	}
	if !found {
		t.Fatalf("no persisted fragment of tests/one holds the appended data (%d files)", len(entries))
	}
}

// The append log keeps nothing of a deleted journal: its pruning is told the
// journal is gone (not an error, which would stop the pruning at the first
// segment holding an append to it, and the log would grow for good).
func TestPersistedEndOfADeletedJournal(t *testing.T) {
	var s = start(t, t.TempDir(), 1)
	defer s.Close()
	applyFile(t, s.Journals(), "testdata/journals.yaml")
	appendTo(t, s.Journals(), "tests/one", "soon gone\n")
	var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.PersistedEnd(ctx, "tests/one"); err != nil {
		t.Fatalf("PersistedEnd of a live journal: %v", err)
	}
	var _, err = client.ApplyJournals(ctx, s.Journals(), &pb.ApplyRequest{
		Changes: []pb.ApplyRequest_Change{{Delete: "tests/one", ExpectModRevision: -1}},
	})
	if err != nil {
		t.Fatalf("deleting tests/one: %v", err)
	}
	for {
		if _, err = s.PersistedEnd(ctx, "tests/one"); errors.Is(err, client.ErrJournalNotFound) {
			return
		} else if ctx.Err() != nil {
			t.Fatalf("PersistedEnd of a deleted journal: %v, want %v", err, client.ErrJournalNotFound)
		}
		time.Sleep(50 * time.Millisecond) // Until the brokers see the deletion.
	}
}

// A stack started with TLS and authorization keys serves mutual TLS from a
// CA it keeps across restarts, and its brokers refuse plaintext clients and
// requests not signed by its keys.
func TestSecuredStack(t *testing.T) {
	var dir = t.TempDir()
	var opts = devstack.Options{Dir: dir, UnsafeNoFsync: true, LogLevel: devstacktest.LogLevel(), TLS: true, AuthKeys: "c2VjcmV0LWtleS1vZi10aGUtc3RhY2s="}
	var startSecured = func() *devstack.Stack {
		var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var s, err = devstack.Start(ctx, opts)
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		return s
	}
	var s = startSecured()
	var files, ok = s.TLS()
	if !ok || !strings.HasPrefix(s.EtcdURL(), "https://") || !strings.HasPrefix(string(s.Brokers()[0].Endpoint()), "https://") {
		t.Fatalf("a TLS stack serves %s and %s (%v)", s.EtcdURL(), s.Brokers()[0].Endpoint(), ok)
	}
	applyFile(t, s.Journals(), "testdata/journals.yaml")
	appendTo(t, s.Journals(), "tests/one", "hello\n")

	// A client with the stack's certificate but no authorization.
	var jc, conn, err = devstack.DialJournals(s.Brokers()[0].Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err = client.ListAllJournals(ctx, jc, pb.ListRequest{}); err == nil {
		t.Error("a client without a certificate listed the journals")
	}
	var ca, _ = os.ReadFile(files.CAFile)
	if err = s.Close(); err != nil {
		t.Fatal(err)
	}

	s = startSecured()
	defer s.Close()
	if files2, _ := s.TLS(); files2 != files {
		t.Errorf("TLS files moved: %v, then %v", files, files2)
	}
	if again, _ := os.ReadFile(files.CAFile); !bytes.Equal(ca, again) {
		t.Error("a restart made a new CA")
	}
	if got := readN(t, s.Journals(), "tests/one", 6); got != "hello\n" {
		t.Fatalf("read back %q", got)
	}
}

// Appends that a stack acknowledged survive a SIGKILL of its process (all
// of its brokers at once): a stack started again on the directory appends
// again what its fragments lacked, at the same offsets, from its append log.
func TestAcknowledgedAppendsSurviveSIGKILL(t *testing.T) {
	var dir = t.TempDir()
	var cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "DEVSTACK_CRASH_CHILD_DIR="+dir)
	var stdout, err = cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err = cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Read acknowledgements until a good number of appends were made, then
	// kill the process, reading what it acknowledged in the meantime.
	var acked = map[pb.Journal][]string{}
	type reading struct {
		offset int64
		crc    uint32
	}
	var read = map[pb.Journal]reading{}
	var sc = bufio.NewScanner(stdout)
	var n int
	for sc.Scan() {
		var r reading
		var journal string
		if _, err := fmt.Sscanf(sc.Text(), "read %s %d %d", &journal, &r.offset, &r.crc); err == nil {
			read[pb.Journal(journal)] = r
			continue
		}
		var line, ok = strings.CutPrefix(sc.Text(), "acknowledged ")
		if !ok {
			t.Fatalf("the stack's process: %s", sc.Text())
		}
		var ackedJournal = pb.Journal(line[strings.LastIndex(line, " ")+1:])
		acked[ackedJournal] = append(acked[ackedJournal], line+"\n")
		if n++; n == 2000 {
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	_ = cmd.Wait()
	if n < 2000 {
		t.Fatalf("the stack's process acknowledged only %d appends", n)
	}

	var s = start(t, dir, 2)
	defer s.Close()
	if losses := s.Losses(); len(losses) != 0 {
		t.Errorf("Losses: %v", losses)
	}
	for journal, lines := range acked {
		var want = strings.Join(lines, "")
		// What it acknowledged, at the offsets it acknowledged, perhaps
		// followed by an append it made but could not acknowledge.
		if got := readN(t, s.Journals(), journal, len(want)); got != want {
			t.Errorf("%s holds %d bytes that differ from the %d acknowledged", journal, len(got), len(want))
		}
	}
	// What the readers read is there, as they read it.
	for journal, r := range read {
		var got = readN(t, s.Journals(), journal, int(r.offset))
		if crc32.ChecksumIEEE([]byte(got)) != r.crc {
			t.Errorf("%s through offset %d differs from what a reader read before the crash", journal, r.offset)
		}
	}
	if len(read) == 0 {
		t.Error("the readers read nothing before the crash")
	}
	// The last append of each journal, which the killed process may have
	// logged without acknowledging it (and the restart then replayed), is
	// appended twice by a new writer: the journal holds both copies. The
	// stack never takes an append for one it logged before.
	for journal := range acked {
		var head = writeHead(t, s.Journals(), journal)
		var content = readN(t, s.Journals(), journal, int(head))
		var last = content[strings.LastIndex(strings.TrimSuffix(content, "\n"), "\n")+1:]
		for i := range int64(2) {
			var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
			var resp, err = client.Append(ctx, s.Journals(), pb.AppendRequest{Journal: journal}, strings.NewReader(last))
			cancel()
			var begin = head + i*int64(len(last))
			if err != nil {
				t.Fatalf("appending %s's last append again: %v", journal, err)
			} else if c := resp.Commit; c.Begin != begin || c.End != begin+int64(len(last)) {
				t.Errorf("%s's last append, sent again (%d), committed [%d, %d), want [%d, %d)", journal, i+1, c.Begin, c.End, begin, begin+int64(len(last)))
			}
		}
		if got := readN(t, s.Journals(), journal, int(head)+2*len(last)); got != content+last+last {
			t.Errorf("%s holds %q after its last append %q was sent twice again", journal, got[len(content):], last)
		}
	}
	// And the journals take appends again.
	appendTo(t, s.Journals(), "tests/one", "after the crash\n")
}

// An append the last run logged, past what it persisted, is appended again
// by the next start, whether or not the run acknowledged it (a run killed
// between logging and acknowledging leaves it so): its writer, retrying,
// may append the same bytes again. The stack never acknowledges an append
// without writing it, however its content matches what was logged: a new
// writer appending the same bytes twice finds both in the journal.
func TestLoggedTailIsReplayedAndSameBytesAreAppended(t *testing.T) {
	var dir = t.TempDir()
	var s = start(t, dir, 1)
	applyFile(t, s.Journals(), "testdata/journals.yaml")
	appendTo(t, s.Journals(), "tests/one", "a\n")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// What a run killed after logging "tick\n" at the persisted end leaves.
	if err := devstack.WriteAppendLogSegment(dir, 7, "tests/one", 2, "tick\n"); err != nil {
		t.Fatal(err)
	}

	s = start(t, dir, 1)
	defer s.Close()
	if losses := s.Losses(); len(losses) != 0 {
		t.Errorf("Losses: %v", losses)
	}
	if got := writeHead(t, s.Journals(), "tests/one"); got != 7 {
		t.Fatalf("after the restart, tests/one's head is %d, want 7 (the logged tail replayed)", got)
	}
	for i := range 2 {
		var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		var resp, err = client.Append(ctx, s.Journals(), pb.AppendRequest{Journal: "tests/one"}, strings.NewReader("tick\n"))
		cancel()
		if err != nil {
			t.Fatalf("append %d of tick: %v", i, err)
		} else if c := resp.Commit; c.Begin != 7+int64(5*i) || c.End != 12+int64(5*i) {
			t.Errorf("append %d of tick committed [%d, %d), want [%d, %d)", i, c.Begin, c.End, 7+5*i, 12+5*i)
		}
	}
	if got := readN(t, s.Journals(), "tests/one", 17); got != "a\ntick\ntick\ntick\n" {
		t.Fatalf("tests/one holds %q", got)
	}
	if got := writeHead(t, s.Journals(), "tests/one"); got != 17 {
		t.Fatalf("tests/one's head is %d, want 17", got)
	}
}
