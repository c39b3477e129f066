package example_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/example/internal/inspect"
	"github.com/gazconsumer/gazconsumer/example/internal/load"
	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/internal/progress"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"github.com/gazconsumer/gazconsumer/specs"
)

// TestRescaleUnderLoad grows the bank's families from 2 partitions to 4
// while a load is published and the ledger and the leaderboard run:
// `gazconsumer rescale` is killed once its first step is done and run again,
// and the ledger's member is killed with SIGKILL once the new shards exist,
// mid-split. Once the consumers catch up, the state of their 4 shards and
// every BalanceChanged event are exactly what the load recorded.
func TestRescaleUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds commands and runs members as processes")
	}
	var ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var bin = t.TempDir()
	buildCommands(t, bin, "ledger", "leaderboard")
	var build = exec.Command("go", "build", "-o", bin+string(filepath.Separator), "./cmd/gazconsumer")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building gazconsumer: %v\n%s", err, out)
	}
	var protos = grownProtos(t, 4)

	var stack = devstacktest.StartT(t, "")
	if _, err := specs.ApplyJournalsFile(ctx, stack.Journals(), "specs/journals.yaml"); err != nil {
		t.Fatal(err)
	}
	var broker = string(stack.Brokers()[0].Endpoint())
	// The command dies at a step, or a moment, picked at random, and is run
	// again; then a member dies, mid-split or a moment later. New shards
	// link their parent's files (it runs in their member), or copy the
	// rows they own from its store, or play its recovery log.
	var seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("RESCALE_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	var rng = rand.New(rand.NewPCG(seed, 2))
	var fork = rng.IntN(3)
	var fromLog, copyRows = fork == 1, fork == 2
	t.Setenv("CONSUMER_FORK_FROM_LOG", strconv.FormatBool(fromLog))
	t.Setenv("CONSUMER_FORK_COPIES_ROWS", strconv.FormatBool(copyRows))
	var ledger, leaderboard = startBank(ctx, t, bin, gazctl(t), stack.EtcdURL(), broker)

	var msgs, rec, err = load.Generate(load.Options{Orders: 12000, Payments: 12000, Poison: 6, Customers: 300, Accounts: 3, Seed: 7, TxnSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var published = make(chan error, 1)
	go func() {
		// Paced, so that the consumers work through the rescale.
		published <- load.Publish(ctx, stack.Journals(), msgs, 100, func(int) { time.Sleep(25 * time.Millisecond) })
	}()
	time.Sleep(2 * time.Second)

	var rescaleLog bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gazconsumer rescale printed:\n%s", rescaleLog.String())
		}
	})
	var batch int // --handoff-batch, if not the default.
	var rescale = func() *exec.Cmd {
		var cmd = exec.Command(filepath.Join(bin, "gazconsumer"), "rescale",
			"--consumer", "Ledger", "--consumer", "Leaderboard", "--settle", "1s", "--timeout", "3m",
			"--handoff-batch", strconv.Itoa(batch),
			"--etcd.address", stack.EtcdURL(), "--broker.address", broker, protos)
		cmd.Stdout, cmd.Stderr = &rescaleLog, &rescaleLog
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	var killCmd, victim, killMember = rng.IntN(3), []*member{ledger, leaderboard}[rng.IntN(2)], rng.IntN(2)
	// Shards hand off their rows in one transaction, or over many.
	batch = []int{0, 4 << 10, 64 << 10}[rng.IntN(3)]
	t.Logf("seed %d (set RESCALE_SEED to repeat): the command dies at point %d, the %s's member at point %d; --handoff-batch %d; --consumer.fork-from-log=%t; --consumer.fork-copies-rows=%t",
		seed, killCmd, victim.app, killMember, batch, fromLog, copyRows)

	// Queries go on throughout, through the ledger's member: a customer's
	// activity, once found, is found again, never less advanced, whichever
	// shard answers (the parent, or the new shard owning it once the parent
	// hides it), though calls may fail while a member is down.
	var querying, queried = make(chan struct{}), make(chan error, 1)
	var answered, failed int
	go func() {
		var err error
		answered, failed, err = queryThroughout(ctx, ledger, rec, querying)
		queried <- err
	}()
	defer func() {
		close(querying)
		if err := <-queried; err != nil {
			t.Error(err)
		}
		t.Logf("queries during the rescale: %d answered, %d failed (a member down, or a shard not serving yet)", answered, failed)
	}()

	// The members' metrics tell the phase of each shard's rescale: split
	// once it split, then dropping what it no longer owns, then nothing.
	var members = progress.NewMembers(brokerconn.Security{})
	defer members.Close()
	var phases = watchRescalePhases(ctx, members, ledger, leaderboard)

	var cmd = rescale()
	switch killCmd {
	case 0: // Once it labeled the shards.
		awaitSpec(ctx, t, stack.Etcd(), "/gazette/consumers/ledger", "ledger-01", func(s *pc.ShardSpec) bool {
			return s.LabelSet.ValueOf(runtime.LabelSplitTo) == "4"
		})
	case 1: // Once it created new shards.
		awaitSpec(ctx, t, stack.Etcd(), "/gazette/consumers/ledger", "ledger-03", func(*pc.ShardSpec) bool { return true })
	default:
		time.Sleep(time.Duration(rng.Int64N(int64(4 * time.Second))))
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	t.Log("killed gazconsumer rescale; running it again")
	cmd = rescale()
	var rescaled = make(chan error, 1)
	go func() { rescaled <- cmd.Wait() }()

	switch killMember {
	case 0: // Once its new shards exist.
		awaitSpec(ctx, t, stack.Etcd(), "/gazette/consumers/"+victim.app, victim.app+"-03", func(*pc.ShardSpec) bool { return true })
	default:
		time.Sleep(time.Duration(rng.Int64N(int64(4 * time.Second))))
	}
	victim.kill()
	t.Logf("killed the %s's member", victim.app)
	victim.start()

	select {
	case err = <-rescaled:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		t.Fatalf("gazconsumer rescale: %v\n%s", err, rescaleLog.String())
	}
	t.Logf("gazconsumer rescale:\n%s", rescaleLog.String())
	// The shards are those `gazconsumer specs` writes for 4 partitions: a
	// new shard's spec lists its own journals, and no label of the rescale
	// is left.
	for _, app := range []string{"ledger", "leaderboard"} {
		for i := range 4 {
			var id = fmt.Sprintf("%s-%02d", app, i)
			awaitSpec(ctx, t, stack.Etcd(), "/gazette/consumers/"+app, id, func(s *pc.ShardSpec) bool {
				for _, l := range []string{runtime.LabelSplitTo, runtime.LabelSplitFrom} {
					if v := s.LabelSet.ValueOf(l); v != "" {
						t.Fatalf("shard %s is still labeled %s=%s", id, l, v)
					}
				}
				for _, src := range s.Sources {
					if !strings.HasSuffix(src.Journal.String(), fmt.Sprintf("/part-%02d", i)) {
						t.Fatalf("shard %s reads %s, not only its own partition", id, src.Journal)
					}
				}
				return true
			})
		}
	}
	if err = <-published; err != nil {
		t.Fatal(err)
	}

	var ledgerShards, ledgerConn, _ = inspect.DialShards(pb.Endpoint(ledger.address()), brokerconn.Security{})
	defer ledgerConn.Close()
	var boardShards, boardConn, _ = inspect.DialShards(pb.Endpoint(leaderboard.address()), brokerconn.Security{})
	defer boardConn.Close()
	var follower = progress.NewFollower(stack.Journals(), brokerconn.Security{},
		progress.App{Name: "ledger", Shards: ledgerShards}, progress.App{Name: "leaderboard", Shards: boardShards})
	defer follower.Close()
	var done = make(chan struct{})
	close(done)
	sts, err := follower.Wait(ctx, 100*time.Millisecond, done, nil)
	if err != nil {
		t.Fatalf("waiting for the consumers to catch up: %v", err)
	}
	for _, st := range sts {
		if st.Shards != 4 {
			t.Errorf("%+v: want 4 shards", st)
		}
	}

	var seen = phases.stop()
	t.Logf("the members' metrics showed the rescale's phases %v", seen)
	if !slices.ContainsFunc(seen, func(p string) bool { return strings.HasSuffix(p, " "+runtime.RescaleSplit) }) {
		t.Errorf("no member's metrics showed a shard split (%s): saw %v", runtime.RescaleSplit, seen)
	}
	awaitRescalesDone(ctx, t, members, ledger, leaderboard)

	var events = checkBank(ctx, t, stack, ledgerShards, boardShards, rec)
	t.Logf("checked %d balances, %d customers' activity and %d events across 4 shards: %d holds of unpaid orders released once each, %d accounts idle, %d dead letters",
		len(rec.Balances), len(rec.Activity), events, len(rec.Unpaid), len(rec.Balances), len(rec.Poison))
}

// grownProtos copies the example's .proto files into a directory, their
// families grown to n partitions, and returns it.
func grownProtos(t *testing.T, n int) string {
	t.Helper()
	var dir = t.TempDir()
	var src = "proto"
	if err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var b, rerr = os.ReadFile(path)
		if rerr != nil {
			return rerr
		}
		b = []byte(strings.ReplaceAll(string(b), "partitions: 2", "partitions: "+strconv.Itoa(n)))
		var to = filepath.Join(dir, strings.TrimPrefix(path, src))
		if err = os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// queryThroughout asks, until stop is closed, the activity of the load's
// customers through ledger's member, and fails if one found is then missing,
// or less advanced than before. It returns an error too if no call was
// answered, and the counts of calls answered and failed.
func queryThroughout(ctx context.Context, ledger *member, rec *load.Record, stop <-chan struct{}) (answered, failed int, _ error) {
	var conn, err = query.Dialer(nil)(pb.Endpoint(ledger.address()))
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	var client = bankv1.NewLedgerQueriesClient(query.NewClient(conn, nil))
	var seen = make(map[string]uint64) // Orders and payments of each customer, as last answered.
	for i := 0; ; i++ {
		select {
		case <-stop:
			if answered == 0 {
				return 0, failed, fmt.Errorf("queries during the rescale: none of %d answered", failed)
			}
			return answered, failed, nil
		default:
		}
		time.Sleep(2 * time.Millisecond)
		var customer = rec.Activity[i%len(rec.Activity)].Customer
		var callCtx, cancel = context.WithTimeout(ctx, 2*time.Second)
		var a, err = client.GetActivity(callCtx, &bankv1.GetActivityRequest{CustomerId: customer})
		cancel()
		var was, found = seen[customer]
		switch {
		case status.Code(err) == codes.NotFound && found:
			return answered, failed, fmt.Errorf("queries during the rescale: customer %s had %d orders and payments, then none: %v", customer, was, err)
		case status.Code(err) == codes.NotFound:
		case err != nil:
			failed++ // A member down, or a shard not yet serving.
		case a.Orders+a.Payments < was:
			return answered, failed, fmt.Errorf("queries during the rescale: customer %s had %d orders and payments, then %d", customer, was, a.Orders+a.Payments)
		default:
			seen[customer], answered = a.Orders+a.Payments, answered+1
		}
	}
}

// awaitSpec waits until the spec of shard id, under etcd prefix, exists and
// satisfies ok.
func awaitSpec(ctx context.Context, t *testing.T, etcd *clientv3.Client, prefix, id string, ok func(*pc.ShardSpec) bool) {
	t.Helper()
	for {
		var resp, err = etcd.Get(ctx, prefix+allocator.ItemsPrefix+id)
		if err == nil && len(resp.Kvs) == 1 {
			var spec pc.ShardSpec
			if err = spec.Unmarshal(resp.Kvs[0].Value); err == nil && ok(&spec) {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("shard %s: %v", id, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// phaseWatch samples the rescale phases of the shards of members, as their
// metrics report them, until stopped.
type phaseWatch struct {
	done chan struct{}
	seen chan []string
}

// watchRescalePhases samples the metrics of members every 50 ms.
func watchRescalePhases(ctx context.Context, mm *progress.Members, members ...*member) *phaseWatch {
	var w = &phaseWatch{done: make(chan struct{}), seen: make(chan []string, 1)}
	go func() {
		var seen []string
		var ticker = time.NewTicker(50 * time.Millisecond)
		defer ticker.Stop()
		for {
			var phases, _ = memberPhases(ctx, mm, members) // A member may be down, for now.
			for _, p := range phases {
				if !slices.Contains(seen, p) {
					seen = append(seen, p)
				}
			}
			select {
			case <-ticker.C:
			case <-w.done:
				slices.Sort(seen)
				w.seen <- seen
				return
			case <-ctx.Done():
				w.seen <- seen
				return
			}
		}
	}()
	return w
}

// stop stops the watch, and returns each "shard phase" it saw.
func (w *phaseWatch) stop() []string {
	close(w.done)
	return <-w.seen
}

// rescalePhases returns the "shard phase" of each shard of the bank's
// consumers (up to 4 partitions) in a phase of a rescale, in metrics.
func rescalePhases(metrics progress.Metrics) []string {
	var out []string
	for _, app := range []string{"ledger", "leaderboard"} {
		for i := range 4 {
			var id = fmt.Sprintf("%s-%02d", app, i)
			for phase, v := range metrics.Labeled(progress.RescalePhase, "phase", "shard", id) {
				if v == 1 {
					out = append(out, id+" "+phase)
				}
			}
		}
	}
	return out
}

// memberPhases returns the "shard phase" of each shard of members in a
// phase of a rescale (rescalePhases), and the errors of the metrics it could
// not read.
func memberPhases(ctx context.Context, mm *progress.Members, members []*member) (phases, errs []string) {
	for _, m := range members {
		var metrics, err = mm.Metrics(ctx, pb.Endpoint(m.address()))
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		phases = append(phases, rescalePhases(metrics)...)
	}
	return phases, errs
}

// awaitRescalesDone waits until no shard of members is in a phase of a
// rescale, as their metrics report: each dropped what it no longer owns.
func awaitRescalesDone(ctx context.Context, t *testing.T, mm *progress.Members, members ...*member) {
	t.Helper()
	var ctx2, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var left, errs = memberPhases(ctx2, mm, members)
		if left = append(left, errs...); len(left) == 0 {
			return
		}
		select {
		case <-ctx2.Done():
			t.Fatalf("shards still in a phase of the rescale a minute after it ended: %v", left)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
