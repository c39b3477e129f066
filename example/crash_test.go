package example_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/example/internal/check"
	"github.com/gazconsumer/gazconsumer/example/internal/inspect"
	"github.com/gazconsumer/gazconsumer/example/internal/load"
	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/internal/progress"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"github.com/gazconsumer/gazconsumer/specs"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
)

func TestMain(m *testing.M) {
	var code = m.Run()
	os.Exit(devstacktest.LeakChecked(code))
}

// buildCommands builds the example's consumer commands into dir.
func buildCommands(t *testing.T, dir string, names ...string) {
	t.Helper()
	var args = []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./example/cmd/"+n)
	}
	var cmd = exec.Command("go", args...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %v: %v\n%s", args, err, out)
	}
}

// gazctl returns the path of the gazctl installed by scripts/setup.sh.
func gazctl(t *testing.T) string {
	t.Helper()
	var path, err = filepath.Abs("../.tools/bin/gazctl")
	if err != nil {
		t.Fatal(err)
	} else if _, err = os.Stat(path); err != nil {
		t.Fatalf("gazctl is not installed (run scripts/setup.sh): %v", err)
	}
	return path
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	var l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// member is a consumer process: one of the example's commands, restarted
// as a new member (a new ID and state directory) on the same port.
type member struct {
	t       *testing.T
	bin     string
	app     string
	port    string
	args    []string
	started int
	cmd     *exec.Cmd
	log     *bytes.Buffer
	done    chan error // Receives what Wait returned, once.
	exited  bool
	exitErr error
}

func (m *member) address() string { return "http://127.0.0.1:" + m.port }

// start starts a new process of the member.
func (m *member) start() {
	m.t.Helper()
	m.started++
	m.log = new(bytes.Buffer)
	m.cmd = exec.Command(filepath.Join(m.bin, m.app), append([]string{
		"--consumer.host", "127.0.0.1",
		"--consumer.port", m.port,
		"--consumer.id", fmt.Sprintf("%s-%d", m.app, m.started),
		"--consumer.state-dir", m.t.TempDir(),
		"--etcd.lease", "2s",
		"--log.level", "warn",
	}, m.args...)...)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		m.t.Fatalf("starting %s: %v", m.app, err)
	}
	var cmd, done = m.cmd, make(chan error, 1)
	m.done, m.exited, m.exitErr = done, false, nil
	go func() { done <- cmd.Wait() }()
}

// wait waits up to d for the process to exit, and reports whether it did.
func (m *member) wait(d time.Duration) bool {
	if m.exited {
		return true
	}
	select {
	case m.exitErr = <-m.done:
		m.exited = true
	case <-time.After(d):
	}
	return m.exited
}

// exitCode returns the process's exit code, if it has exited.
func (m *member) exitCode() (int, bool) {
	if !m.wait(0) {
		return 0, false
	}
	var exit *exec.ExitError
	if errors.As(m.exitErr, &exit) {
		return exit.ExitCode(), true
	}
	return 0, true
}

// waitServing waits until the member accepts connections on its port.
func (m *member) waitServing(ctx context.Context) {
	m.t.Helper()
	for {
		var conn, err = net.DialTimeout("tcp", "127.0.0.1:"+m.port, time.Second)
		if err == nil {
			conn.Close()
			return
		}
		select {
		case <-ctx.Done():
			m.t.Fatalf("%s does not serve on port %s: %v\n%s", m.app, m.port, err, m.log)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill kills the process with SIGKILL, as a crash would.
func (m *member) kill() {
	m.t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		m.t.Fatalf("killing %s: %v", m.app, err)
	}
	m.wait(time.Minute)
}

// stop stops the process with SIGTERM, once it has installed its handler
// (it serves by then), and reports whether it exited cleanly.
func (m *member) stop() {
	m.t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if m.wait(0) {
		return // It exited already: its caller judged how.
	}
	m.waitServing(ctx)
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	if !m.wait(time.Minute) {
		_ = m.cmd.Process.Kill()
		m.wait(time.Minute)
		m.t.Errorf("%s did not stop on SIGTERM:\n%s", m.app, m.log)
	} else if m.exitErr != nil {
		m.t.Errorf("%s exited with %v:\n%s", m.app, m.exitErr, m.log)
	}
}

// TestTimersExactlyOnceUnderCrashes kills the ledger's member with SIGKILL
// at random moments while its timers fire and its rows expire: a load's
// unpaid orders' holds are released a hold window after them, and its
// accounts fall idle once the load ends, while the member dies and is
// started again. Once all is due, each unpaid order's hold was released
// once (one event, its refund in the balance), no paid order's was, every
// account fell idle at its last version, each time once, and each invalid
// payment is a dead letter once: each firing's effect committed once.
func TestTimersExactlyOnceUnderCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds commands and runs members as processes")
	}
	const kills = 3
	var seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("TIMER_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (set TIMER_CRASH_SEED to repeat)", seed)
	var rng = rand.New(rand.NewPCG(seed, 3))

	var ctx, cancel = context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var bin = t.TempDir()
	buildCommands(t, bin, "ledger", "leaderboard")
	var stack = devstacktest.StartT(t, "")
	if _, err := specs.ApplyJournalsFile(ctx, stack.Journals(), "specs/journals.yaml"); err != nil {
		t.Fatal(err)
	}
	var ledger, leaderboard = startBank(ctx, t, bin, gazctl(t), stack.EtcdURL(), string(stack.Brokers()[0].Endpoint()))

	var msgs, rec, err = load.Generate(load.Options{Orders: 3000, Payments: 3000, Poison: 5, Customers: 100, Accounts: 3, Seed: seed, TxnSize: 50})
	if err != nil {
		t.Fatal(err)
	}
	var start = time.Now()
	var published = make(chan error, 1)
	go func() {
		// Paced over some 20 s: holds fall due from a hold window after
		// the start, accounts fall idle once the load ends.
		published <- load.Publish(ctx, stack.Journals(), msgs, 50, func(int) { time.Sleep(160 * time.Millisecond) })
	}()

	var ledgerShards, ledgerConn, _ = inspect.DialShards(pb.Endpoint(ledger.address()), brokerconn.Security{})
	defer ledgerConn.Close()
	var boardShards, boardConn, _ = inspect.DialShards(pb.Endpoint(leaderboard.address()), brokerconn.Security{})
	defer boardConn.Close()
	var follower = progress.NewFollower(stack.Journals(), brokerconn.Security{},
		progress.App{Name: "ledger", Shards: ledgerShards}, progress.App{Name: "leaderboard", Shards: boardShards})
	defer follower.Close()

	// Kill the ledger at moments within the firings: from a hold window
	// after the load began, to 5 s (accounts' ttl) after it ends.
	var moments []time.Duration
	for range kills {
		moments = append(moments, holdWindow+time.Duration(rng.Int64N(int64(15*time.Second))))
	}
	slices.Sort(moments)
	t.Logf("the ledger dies at %v after the load begins", moments)
	for _, at := range moments {
		time.Sleep(time.Until(start.Add(at)))
		for {
			var sts, err = follower.Read(ctx)
			if err == nil && sts[0].Primaries == sts[0].Shards {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("the ledger did not take its shards: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		ledger.kill()
		t.Logf("killed the ledger (process %d) %s after the load began", ledger.started, time.Since(start).Round(time.Millisecond))
		ledger.start()
	}
	if err = <-published; err != nil {
		t.Fatal(err)
	}
	var done = make(chan struct{})
	close(done)
	if _, err = follower.Wait(ctx, 100*time.Millisecond, done, nil); err != nil {
		t.Fatalf("waiting for the consumers to catch up: %v", err)
	}
	var events = checkBank(ctx, t, stack, ledgerShards, boardShards, rec)
	t.Logf("checked %d events: %d holds released of %d orders, %d accounts idle, %d dead letters, after %d crashes",
		events, len(rec.Unpaid), rec.Options.Orders, len(rec.Balances), len(rec.Poison), kills)
}

// holdWindow is the ledger's hold window in these tests: how long it holds
// an order's amount for the order's payment. Longer than a member's
// restart (the lease of a member killed is 2 s, then the shards recover),
// so that a payment read after a restart finds its order's hold; short,
// since the tests wait it out before they check.
const holdWindow = 15 * time.Second

// settled bounds the wait, once the consumers caught up, for what the
// ledger does at a time: holds released a hold window after their orders,
// accounts idle 5 s (RecentAccount's ttl) after their last changes, and the
// leaderboard reading those releases.
const settled = holdWindow + time.Minute

// startBank starts the example's ledger and leaderboard as members of the
// stack at etcd and broker, stopped when t ends, and applies their shards
// with Gazette's gazctl, through the members' Shard API.
func startBank(ctx context.Context, t *testing.T, bin, gazctl, etcd, broker string) (ledger, leaderboard *member) {
	t.Helper()
	var common = []string{"--etcd.address", etcd, "--broker.address", broker}
	ledger = &member{t: t, bin: bin, app: "ledger", port: freePort(t), args: append(slices.Clone(common), "--hold-window", holdWindow.String())}
	leaderboard = &member{t: t, bin: bin, app: "leaderboard", port: freePort(t), args: common}
	var members = []*member{ledger, leaderboard}
	for _, m := range members {
		m.start()
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.stop()
			if t.Failed() {
				t.Logf("%s (process %d) logged:\n%s", m.app, m.started, m.log)
			}
		}
	})
	for _, m := range members {
		m.waitServing(ctx)
		var out, err = exec.CommandContext(ctx, gazctl, "shards", "apply", "--specs", "specs/"+m.app+"-shards.yaml",
			"--consumer.address", m.address(), "--broker.address", broker).CombinedOutput()
		if err != nil {
			t.Fatalf("gazctl shards apply to %s: %v\n%s", m.app, err, out)
		}
	}
	return ledger, leaderboard
}

// TestExactlyOnceUnderCrashes publishes a load of orders and payments while
// the ledger and the leaderboard run as processes, kills them with SIGKILL
// at random moments and restarts them each time. Once they have caught up,
// the ledger's balances and activity and the leaderboard's standings and
// ranks equal the outcome the load recorded, exactly, and every
// BalanceChanged event is read once, read-committed: nothing was lost or
// applied twice.
func TestExactlyOnceUnderCrashes(t *testing.T) {
	const kills = 3
	var seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (set CRASH_SEED to repeat)", seed)
	var rng = rand.New(rand.NewPCG(seed, 1))

	var ctx, cancel = context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var bin = t.TempDir()
	buildCommands(t, bin, "ledger", "leaderboard")
	var gazctl = gazctl(t)

	var stack = devstacktest.StartT(t, "")
	if _, err := specs.ApplyJournalsFile(ctx, stack.Journals(), "specs/journals.yaml"); err != nil {
		t.Fatal(err)
	}
	var ledger, leaderboard = startBank(ctx, t, bin, gazctl, stack.EtcdURL(), string(stack.Brokers()[0].Endpoint()))
	var members = []*member{ledger, leaderboard}

	var msgs, rec, err = load.Generate(load.Options{Orders: 15000, Payments: 15000, Poison: 7, Customers: 300, Accounts: 3, Seed: seed, TxnSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var published = make(chan struct{})
	var pubErr error
	go func() {
		defer close(published)
		// Paced, so that the consumers have work through the crashes.
		pubErr = load.Publish(ctx, stack.Journals(), msgs, 100, func(int) { time.Sleep(20 * time.Millisecond) })
	}()

	var ledgerShards, ledgerConn, _ = inspect.DialShards(pb.Endpoint(ledger.address()), brokerconn.Security{})
	defer ledgerConn.Close()
	var boardShards, boardConn, _ = inspect.DialShards(pb.Endpoint(leaderboard.address()), brokerconn.Security{})
	defer boardConn.Close()
	var follower = progress.NewFollower(stack.Journals(), brokerconn.Security{},
		progress.App{Name: "ledger", Shards: ledgerShards}, progress.App{Name: "leaderboard", Shards: boardShards})
	defer follower.Close()

	// Crash a member at random moments while it is primary of its shards,
	// alternating between them, and restart it at once.
	for k := range kills {
		var m = members[k%len(members)]
		for {
			var sts, err = follower.Read(ctx)
			if err == nil && sts[k%len(members)].Primaries == sts[k%len(members)].Shards {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("%s did not take its shards: %v", m.app, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(100*time.Millisecond + time.Duration(rng.Int64N(int64(900*time.Millisecond))))
		var sts, _ = follower.Read(ctx)
		m.kill()
		t.Logf("killed %s (process %d) at %+v", m.app, m.started, sts)
		m.start()
	}
	<-published
	if pubErr != nil {
		t.Fatal(pubErr)
	}
	var done = make(chan struct{})
	close(done)
	sts, err := follower.Wait(ctx, 100*time.Millisecond, done, nil)
	if err != nil {
		t.Fatalf("waiting for the consumers to catch up: %v", err)
	}
	t.Logf("caught up: %+v", sts)

	var events = checkBank(ctx, t, stack, ledgerShards, boardShards, rec)
	t.Logf("checked %d balances, %d customers' activity and %d events after %d crashes", len(rec.Balances), len(rec.Activity), events, kills)

	// The queries services answer the same, live: every balance through
	// the ledger's member (which routes them), and the top ranks merged
	// across the leaderboard's shards.
	ledgerConn2, err := query.Dialer(nil)(pb.Endpoint(ledger.address()))
	if err != nil {
		t.Fatal(err)
	}
	defer ledgerConn2.Close()
	var ledgerQueries = bankv1.NewLedgerQueriesClient(query.NewClient(ledgerConn2, nil))
	for _, b := range rec.Balances {
		var got, err = ledgerQueries.GetBalance(ctx, &bankv1.GetBalanceRequest{CustomerId: b.Customer, AccountId: b.Account})
		if err != nil {
			t.Fatalf("GetBalance(%s, %s): %v", b.Customer, b.Account, err)
		} else if got.BalanceCents != b.Cents || got.Version != b.Changes {
			t.Errorf("GetBalance(%s, %s) = %d cents, version %d; want %d, %d", b.Customer, b.Account, got.BalanceCents, got.Version, b.Cents, b.Changes)
		}
	}
	boardConn2, err := query.Dialer(nil)(pb.Endpoint(leaderboard.address()))
	if err != nil {
		t.Fatal(err)
	}
	defer boardConn2.Close()
	top, err := bankv1.NewLeaderboardQueriesClient(query.NewClient(boardConn2, nil)).Top(ctx, &bankv1.TopRequest{Limit: 20})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range rec.Top(20) {
		if i >= len(top.Ranks) || top.Ranks[i].CustomerId != want.Customer || top.Ranks[i].AccountId != want.Account || top.Ranks[i].BalanceCents != want.Cents {
			t.Fatalf("Top: rank %d is %v, want %+v", i+1, top.Ranks[min(i, len(top.Ranks)-1)], want)
		}
	}
	t.Logf("queried %d balances and the top 20, live", len(rec.Balances))
}

// checkBank checks the ledger's and the leaderboard's state, as their
// shards' recovery logs hold it, every BalanceChanged event and the
// ledger's dead letters, against rec: each difference is an error of t.
// What the ledger does at a time comes after the consumers caught up: it
// checks again, while it finds differences, for up to settled. It returns
// the count of events.
func checkBank(ctx context.Context, t *testing.T, stack *devstacktest.Stack, ledgerShards, boardShards pc.ShardClient, rec *load.Record) int {
	t.Helper()
	var deadline = time.Now().Add(settled)
	var problems, events = bankProblems(ctx, t, stack, ledgerShards, boardShards, rec)
	for ; len(problems) != 0 && time.Now().Before(deadline); problems, events = bankProblems(ctx, t, stack, ledgerShards, boardShards, rec) {
		time.Sleep(time.Second)
	}
	for i, p := range problems {
		if i == 20 {
			t.Errorf("... and %d more", len(problems)-20)
			break
		}
		t.Error(p)
	}
	return events
}

// bankProblems returns what checkBank finds different from rec, and the
// count of events.
func bankProblems(ctx context.Context, t *testing.T, stack *devstacktest.Stack, ledgerShards, boardShards pc.ShardClient, rec *load.Record) ([]string, int) {
	t.Helper()
	var ledgerSnap, err = inspect.Open(ctx, ledgerShards, stack.Journals(), stack.Etcd(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ledgerSnap.Close()
	boardSnap, err := inspect.Open(ctx, boardShards, stack.Journals(), stack.Etcd(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer boardSnap.Close()
	events, err := inspect.Events(ctx, stack.Journals())
	if err != nil {
		t.Fatal(err)
	}
	problems, err := check.Ledger(rec, ledgerSnap)
	if err != nil {
		t.Fatal(err)
	}
	p, err := check.Leaderboard(rec, boardSnap)
	if err != nil {
		t.Fatal(err)
	}
	problems = append(append(problems, p...), check.Events(rec, events)...)
	dead, err := inspect.DeadLetters(ctx, stack.Journals())
	if err != nil {
		t.Fatal(err)
	}
	if p, err = check.DeadLetters(rec, dead, func(j pb.Journal, o pb.Offset) (message.Message, error) {
		return inspect.MessageAt(ctx, stack.Journals(), j, o)
	}); err != nil {
		t.Fatal(err)
	}
	return append(problems, p...), len(events)
}
