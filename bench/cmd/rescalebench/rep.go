package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/internal/progress"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/specs"
)

const (
	ledgerPrefix = "/gazette/consumers/ledger"
	eventsPrefix = "bank/balance-changes/"
)

var (
	parents  = []string{"ledger-00", "ledger-01"}
	children = []string{"ledger-02", "ledger-03"} // Child q is forked from parent q%2.
)

// result is what one repetition measured.
type result struct {
	recovery     map[string]time.Duration // Parent's, from its process's start until PRIMARY.
	recoveryRead map[string]int64         // Bytes its recovery played.
	live         map[string]int64         // Parent's live state as the split starts: its store's files.
	liveHints    map[string]int64         // Parent's live state as the split starts, as of its newest hints.
	liveRecovery map[string]int64         // Parent's live state as it was killed: its store's files.
	splitLive    map[string]int64         // The greater of live and liveHints: what the goal compares a fork's reads with.

	serve       map[string]time.Duration // Child's, from the command's start until PRIMARY.
	serveCreate map[string]time.Duration // Child's, from its spec's creation until PRIMARY.
	forkRead    map[string]int64         // Bytes its fork played.
	forkTook    map[string]time.Duration // Its fork's playback and Fork, or read of its parent's store.
	forkLocal   map[string]bool          // It forked from its parent's store, in its member.
	split       time.Duration            // The command's run.

	drop                              time.Duration            // From the command's end until every shard dropped what it no longer owns.
	dropTook                          map[string]time.Duration // Each parent's drop, from its beginning until it dropped all it no longer owns.
	dropHalfway                       map[string]float64       // How far each parent's drop said it had gone halfway through its time (at the debug level).
	rateBefore, rateDuring, rateAfter float64                  // Events a second.
	rateDrop                          float64                  // Events a second while the shards drop what they no longer own.
	compact                           time.Duration            // From the drops' end until every shard's store compacted its files.
	rateCompact                       float64                  // Events a second meanwhile.
	minDuring                         float64                  // Lowest events a second over 1 s during the split (over the split, if shorter).
	readBefore, readDuring            float64                  // Messages read a second (gazconsumer_shard_messages_total).
	memberCPUBefore, memberCPUDuring  float64                  // Member's CPU seconds a second.
	memberCPUAfter                    float64                  // Likewise, after the compactions.
	lagSplit                          int64                    // Input bytes yet to consume as the split starts (Shard API's Stat).
	ranOut                            bool                     // Whether the ledger had written every event before the rate after was taken.
	published                         float64                  // Messages a second the load was published at.
	eventBytes                        float64                  // Bytes of an event, as measured.

	cpu   map[string]float64 // CPU seconds of each process, all told.
	check string             // bankctl check's verdict.
}

// runRep runs one repetition on a new stack.
func runRep(ctx context.Context, c config, rep int, protos string) (_ *result, err error) {
	var r = &result{recovery: map[string]time.Duration{}, recoveryRead: map[string]int64{}, live: map[string]int64{}, liveHints: map[string]int64{},
		liveRecovery: map[string]int64{}, serve: map[string]time.Duration{}, serveCreate: map[string]time.Duration{},
		forkRead: map[string]int64{}, forkTook: map[string]time.Duration{}, forkLocal: map[string]bool{}, cpu: map[string]float64{}}
	var dir = filepath.Join(c.work, fmt.Sprintf("rep-%d", rep+1))
	if err = os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var cpu0 = selfCPU()
	stack, err := devstacktest.Start(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("starting the stack: %w", err)
	}
	defer stack.Close()
	if _, err = specs.ApplyJournalsFile(ctx, stack.Journals(), filepath.Join(c.root, "example", "specs", "journals.yaml")); err != nil {
		return nil, err
	}
	var etcd, broker = stack.EtcdURL(), string(stack.Brokers()[0].Endpoint())
	var common = []string{"--etcd.address", etcd, "--broker.address", broker, "--etcd.lease", c.lease.String()}
	if c.direct {
		common = append(common, "--broker.file-root", stack.FragmentsRoot())
	} else {
		common = append(common, "--broker.direct-fragment-reads=false")
	}
	if c.fromLog {
		common = append(common, "--consumer.fork-from-log")
	}
	common = append(common, "--consumer.fork-yield", c.forkYield.String())
	if c.copyRows {
		common = append(common, "--consumer.fork-copies-rows")
	}

	// The ledger's hold window is longer than its backlog lasts here: the
	// window is processing time, and a payment read more than a window
	// after its order (its journal read behind the orders') would find the
	// hold released (a run with 30s failed so). bankctl check waits for the
	// holds of unpaid orders to be released.
	ledger, err := newMember(c.bin, dir, "ledger", slices.Concat(common, []string{"--log.format", "json", "--log.level", c.logLevel, "--hold-window", "3m"})...)
	if err != nil {
		return nil, err
	}
	leaderboard, err := newMember(c.bin, dir, "leaderboard", slices.Concat(common, []string{"--log.level", "warn"})...)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, m := range []*member{ledger, leaderboard} {
			if serr := m.stop(); serr != nil && err == nil {
				err = serr
			}
			if err != nil && m.n != 0 {
				fmt.Fprintf(os.Stderr, "--- end of the logs of %s (%s):\n%s\n", m.id, m.log, m.tail())
			}
		}
	}()
	if err = ledger.start(ctx); err != nil {
		return nil, err
	}
	if err = applyShards(ctx, ledger.endpoint(), filepath.Join(c.root, "example", "specs", "ledger-shards.yaml")); err != nil {
		return nil, err
	}
	if _, err = awaitPrimaries(ctx, stack.Etcd(), parents, ledger.id, nil); err != nil {
		return nil, err
	}

	// The load, published in the background.
	var record = filepath.Join(dir, "record.json")
	var publish = exec.CommandContext(ctx, filepath.Join(c.bin, "bankctl"), "publish",
		"--broker.address", broker, "--orders", strconv.Itoa(c.messages/2), "--payments", strconv.Itoa(c.messages-c.messages/2),
		"--customers", strconv.Itoa(c.customers), "--accounts", strconv.Itoa(c.accounts), "--seed", strconv.Itoa(rep+1),
		"--txn", strconv.Itoa(c.txn), "--rate", strconv.FormatFloat(c.rate, 'f', -1, 64), "--record", record)
	pubOut, err := os.Create(filepath.Join(dir, "publish.out"))
	if err != nil {
		return nil, err
	}
	defer pubOut.Close()
	publish.Stdout, publish.Stderr = pubOut, pubOut
	var pubStart = time.Now()
	if err = publish.Start(); err != nil {
		return nil, fmt.Errorf("bankctl publish: %w", err)
	}
	var published = make(chan error, 1)
	go func() { published <- publish.Wait() }()
	defer func() {
		if publish.ProcessState == nil {
			_ = publish.Process.Signal(syscall.SIGKILL)
			<-published
		}
	}()

	var s = newSampler(stack.Journals(), ledger)
	defer s.close()
	var follower = newLedgerFollower(stack.Journals(), ledger.endpoint())
	defer follower.Close()
	if err = sleep(ctx, c.warmup); err != nil {
		return nil, err
	}

	// 1. The parent's recovery. The load is published while the member is
	// dead: what the member has not consumed is the backlog it then works
	// through, with the whole machine to itself.
	s.pause()
	if err = ledger.kill(); err != nil {
		return nil, err
	}
	for _, p := range parents {
		if r.liveRecovery[p], err = storeBytes(ledger.state(), p); err != nil {
			return nil, err
		}
	}
	select {
	case err = <-published:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("bankctl publish: %w", err)
	}
	r.published = float64(c.messages) / time.Since(pubStart).Seconds()
	r.cpu["bankctl publish"] = cpuOf(publish.ProcessState)
	if err = awaitReleased(ctx, stack.Etcd(), ledger.id); err != nil {
		return nil, err
	}
	if err = ledger.start(ctx); err != nil {
		return nil, err
	}
	s.resume(ledger)
	at, err := awaitPrimaries(ctx, stack.Etcd(), parents, ledger.id, nil)
	if err != nil {
		return nil, err
	}
	for _, p := range parents {
		r.recovery[p] = at[p].Sub(ledger.started)
	}
	logs, err := readLog(ledger.log)
	if err != nil {
		return nil, err
	}
	for _, p := range parents {
		if logs[p] == nil || logs[p].fenced == 0 {
			return nil, fmt.Errorf("%s logged no \"recovery log fenced\" of %s", ledger.id, p)
		}
		r.recoveryRead[p] = logs[p].fenced
	}

	// 2. The rate before the split, which starts soon after the recovery,
	// so that the parent's state is close to the state it recovered. (A fork
	// plays its parent's newest hints: the dead process's, stored at most
	// 10s before it died, as a primary's are at most 10s old.)
	if err = sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	if err = c.window(ctx, ledger, filepath.Join(dir, "before.pprof")); err != nil {
		return nil, err
	}
	for _, p := range parents {
		if r.live[p], err = storeBytes(ledger.state(), p); err != nil {
			return nil, err
		}
		if r.liveHints[p], err = liveBytes(ctx, stack.Etcd(), p); errors.Is(err, errNoHints) {
			err = nil // The fork plays the log from its start.
		} else if err != nil {
			return nil, err
		}
	}
	if r.lagSplit, err = follower.lag(ctx); err != nil {
		return nil, err
	}

	// 3. The split.
	var splitStart = time.Now()
	var created = make(map[string]time.Time)
	var watchCtx, stopWatch = context.WithCancel(ctx)
	var childrenAt = make(chan map[string]time.Time, 1)
	var watchErr = make(chan error, 1)
	go func() {
		var at, err = awaitPrimaries(watchCtx, stack.Etcd(), children, ledger.id, created)
		childrenAt <- at
		watchErr <- err
	}()
	var profiled = make(chan error, 1)
	if c.profile != 0 {
		go func() { profiled <- ledger.profile(ctx, c.profile, filepath.Join(dir, "split.pprof")) }()
	} else {
		profiled <- nil
	}
	var cpuStart = procCPU(ledger.pid())
	r.cpu["gazconsumer rescale"], err = command(ctx, filepath.Join(dir, "rescale.out"), true, filepath.Join(c.bin, "gazconsumer"), "rescale",
		"--consumer", "Ledger", "--settle", c.settle.String(), "--timeout", "3m",
		"--etcd.address", etcd, "--broker.address", broker, protos)
	var splitEnd = time.Now()
	var cpuEnd = procCPU(ledger.pid())
	if err != nil {
		stopWatch()
		return nil, err
	}
	select {
	case at = <-childrenAt:
		err = <-watchErr
	case <-time.After(10 * time.Second):
		err = errors.New("the new shards are not PRIMARY 10s after the command's end")
	}
	stopWatch()
	if err != nil {
		return nil, err
	} else if err = <-profiled; err != nil {
		return nil, err
	}
	r.split = splitEnd.Sub(splitStart)
	for _, q := range children {
		r.serve[q] = at[q].Sub(splitStart)
		r.serveCreate[q] = at[q].Sub(created[q])
	}
	if logs, err = readLog(ledger.log); err != nil {
		return nil, err
	}
	for _, q := range children {
		if logs[q] == nil || !logs[q].forkSeen {
			return nil, fmt.Errorf("%s logged no fork of %s", ledger.id, q)
		}
		r.forkRead[q], r.forkTook[q], r.forkLocal[q] = logs[q].forked, logs[q].forkTook, logs[q].local
	}
	// The rescale's end: every shard drops what it no longer owns, over
	// as many transactions as it takes, consuming beside.
	var dropEnd time.Time
	var all = append(slices.Clone(parents), children...)
	if dropEnd, err = awaitLogged(ctx, ledger.log, all, "end their rescale (drop what they no longer own)",
		func(l *shardLog) time.Time { return l.ended }); err != nil {
		return nil, err
	}
	r.drop = dropEnd.Sub(splitEnd)
	if logs, err = readLog(ledger.log); err != nil {
		return nil, err
	}
	r.dropTook, r.dropHalfway = map[string]time.Duration{}, map[string]float64{}
	for _, p := range parents {
		if l := logs[p]; l != nil && !l.dropBegan.IsZero() && !l.dropped.IsZero() {
			r.dropTook[p] = l.dropped.Sub(l.dropBegan)
			if half, ok := l.dropHalfway(); ok {
				r.dropHalfway[p] = half
			}
		}
	}
	// Then each store rewrites its files, in the background (its space
	// reclaimed, a new shard's files its own): the rate after is taken
	// once they're done.
	compactEnd, err := awaitLogged(ctx, ledger.log, all, "compact their stores' files",
		func(l *shardLog) time.Time { return l.compacted })
	if err != nil {
		return nil, err
	}
	compactEnd = later(compactEnd, dropEnd)
	r.compact = compactEnd.Sub(dropEnd)
	if err = c.window(ctx, ledger, filepath.Join(dir, "after.pprof")); err != nil {
		return nil, err
	}
	var afterEnd = time.Now()

	// 4. The answer: both consumers caught up with the load.
	if err = leaderboard.start(ctx); err != nil {
		return nil, err
	}
	if err = applyShards(ctx, leaderboard.endpoint(), filepath.Join(c.root, "example", "specs", "leaderboard-shards.yaml")); err != nil {
		return nil, err
	}
	if err = catchUp(ctx, stack.Journals(), ledger.endpoint(), leaderboard.endpoint()); err != nil {
		return nil, err
	}
	events, err := s.eventBytesNow(ctx)
	if err != nil {
		return nil, err
	}
	r.eventBytes = float64(events) / float64(c.messages)
	if last, _, ok := s.around(afterEnd, afterEnd); ok && last.events >= events {
		r.ranOut = true
	}
	s.close()

	var checkOut = filepath.Join(dir, "check.out")
	r.cpu["bankctl check"], err = command(ctx, checkOut, false, filepath.Join(c.bin, "bankctl"), "check", "--record", record, "--wait", "5m",
		"--broker.address", broker, "--etcd.address", etcd,
		"--ledger.address", string(ledger.endpoint()), "--leaderboard.address", string(leaderboard.endpoint()))
	var out, _ = os.ReadFile(checkOut)
	r.check = lastLine(string(out))
	if err != nil {
		return nil, fmt.Errorf("the answer is wrong: %w", err)
	} else if !strings.HasPrefix(r.check, "OK") {
		return nil, fmt.Errorf("bankctl check did not print OK:\n%s", out)
	}

	if err = s.writeCSV(filepath.Join(dir, "samples.csv"), splitStart, r.eventBytes); err != nil {
		return nil, err
	}

	// The rates, from the samples.
	var events1 = func(x sample) float64 { return float64(x.events) / r.eventBytes }
	var read = func(x sample) float64 { return x.read }
	var beforeStart = splitStart.Add(-c.before)
	r.rateBefore = s.rate(beforeStart, splitStart, events1)
	r.splitLive = make(map[string]int64)
	for _, p := range parents {
		r.splitLive[p] = max(r.live[p], r.liveHints[p])
	}
	r.rateDuring = s.rate(splitStart, splitEnd, events1)
	r.rateDrop = s.rate(splitEnd, dropEnd, events1)
	r.rateCompact = s.rate(dropEnd, compactEnd, events1)
	r.rateAfter = s.rate(compactEnd, afterEnd, events1)
	r.minDuring = s.minRate(splitStart, splitEnd, time.Second, events1)
	r.readBefore = s.rate(beforeStart, splitStart, read)
	r.readDuring = s.rate(splitStart, splitEnd, read)
	r.memberCPUBefore = s.rate(beforeStart, splitStart, func(x sample) float64 { return x.cpu })
	r.memberCPUDuring = (cpuEnd - cpuStart) / r.split.Seconds()
	r.memberCPUAfter = s.rate(compactEnd, afterEnd, func(x sample) float64 { return x.cpu })

	for _, m := range []*member{ledger, leaderboard} {
		if err = m.stop(); err != nil {
			return nil, err
		}
		r.cpu[m.app+" members"] = m.cpu
	}
	r.cpu["this process (stack, sampling)"] = selfCPU() - cpu0
	return r, nil
}

// awaitPrimaries waits until each of shards has a PRIMARY assignment of
// slot 0 on member, and returns when each was first seen so (polled every
// 25ms). If created is not nil, it also records when each shard's spec was
// first seen in etcd. A FAILED replica fails it.
func awaitPrimaries(ctx context.Context, etcd *clientv3.Client, shards []string, member string, created map[string]time.Time) (map[string]time.Time, error) {
	var at = make(map[string]time.Time)
	for {
		var now = time.Now()
		var resp, err = etcd.Get(ctx, ledgerPrefix+allocator.AssignmentsPrefix, clientv3.WithPrefix())
		if err != nil {
			return at, fmt.Errorf("reading the assignments: %w", err)
		}
		for _, kv := range resp.Kvs {
			// root/assign/item#zone#member#slot
			var parts = strings.Split(strings.TrimPrefix(string(kv.Key), ledgerPrefix+allocator.AssignmentsPrefix), "#")
			if len(parts) != 4 {
				continue
			}
			var status pc.ReplicaStatus
			if err = status.Unmarshal(kv.Value); err != nil {
				return at, fmt.Errorf("decoding assignment %s: %w", kv.Key, err)
			}
			if status.Code == pc.ReplicaStatus_FAILED {
				return at, fmt.Errorf("shard %s FAILED on %s: %s", parts[0], parts[2], strings.Join(status.Errors, "; "))
			}
			if _, seen := at[parts[0]]; !seen && parts[2] == member && parts[3] == "0" && status.Code == pc.ReplicaStatus_PRIMARY {
				at[parts[0]] = now
			}
		}
		if created != nil {
			for _, id := range shards {
				if _, seen := created[id]; seen {
					continue
				}
				if resp, err := etcd.Get(ctx, ledgerPrefix+allocator.ItemsPrefix+id); err == nil && len(resp.Kvs) != 0 {
					created[id] = now
				}
			}
		}
		var all = true
		for _, id := range shards {
			_, ok := at[id]
			all = all && ok
		}
		if all {
			return at, nil
		}
		if err = sleep(ctx, 25*time.Millisecond); err != nil {
			return at, fmt.Errorf("waiting for shards %s to be PRIMARY: %w", strings.Join(shards, ", "), err)
		}
	}
}

// awaitReleased waits until member holds no assignment: its lease expired.
func awaitReleased(ctx context.Context, etcd *clientv3.Client, member string) error {
	for {
		var resp, err = etcd.Get(ctx, ledgerPrefix+allocator.AssignmentsPrefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return fmt.Errorf("reading the assignments: %w", err)
		}
		var held bool
		for _, kv := range resp.Kvs {
			held = held || strings.Contains(string(kv.Key), "#"+member+"#")
		}
		if !held {
			return nil
		}
		if err = sleep(ctx, 25*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for %s's lease to expire: %w", member, err)
		}
	}
}

// errNoHints is liveBytes' error for a shard that has stored no hints.
var errNoHints = errors.New("no recovery-log hints stored yet")

// liveBytes returns the live state of a ledger shard, as of its newest
// recovery-log hints.
func liveBytes(ctx context.Context, etcd *clientv3.Client, shard string) (int64, error) {
	var resp, err = etcd.Get(ctx, ledgerPrefix+allocator.ItemsPrefix+shard)
	if err != nil {
		return 0, err
	} else if len(resp.Kvs) == 0 {
		return 0, fmt.Errorf("shard %s has no spec", shard)
	}
	var spec pc.ShardSpec
	if err = spec.Unmarshal(resp.Kvs[0].Value); err != nil {
		return 0, err
	}
	hints, err := recoverylog.FetchHints(ctx, etcd, spec.HintPrimaryKey(), 1)
	if err != nil {
		return 0, fmt.Errorf("hints of %s: %w", shard, err)
	} else if hints[0] == nil {
		return 0, fmt.Errorf("shard %s: %w", shard, errNoHints)
	}
	return recoverylog.StatsOf(hints[0]).LiveBytes, nil
}

// storeBytes returns the bytes of the files of the store of shard under a
// member's state directory, as they are now (the stores' directories are
// named after their shards and assignments; a fork's is left out).
func storeBytes(state, shard string) (int64, error) {
	var dirs, err = filepath.Glob(filepath.Join(state, shard+"-*"))
	if err != nil {
		return 0, err
	}
	var total int64
	for _, dir := range dirs {
		if strings.HasSuffix(dir, "-fork") {
			continue
		}
		if err = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			var info, ierr = d.Info()
			if ierr == nil {
				total += info.Size()
			}
			return ierr
		}); err != nil {
			return 0, fmt.Errorf("the store of %s: %w", shard, err)
		}
	}
	if total == 0 {
		return 0, fmt.Errorf("no store of %s under %s", shard, state)
	}
	return total, nil
}

// ledgerFollower reads how far behind its sources the ledger is.
type ledgerFollower struct {
	*progress.Follower
	conn interface{ Close() error }
}

func newLedgerFollower(jc pb.RoutedJournalClient, ep pb.Endpoint) *ledgerFollower {
	var members = progress.NewMembers(brokerconn.Security{})
	var sc, err = members.Shards(ep)
	if err != nil {
		panic(err) // Dialing is lazy: it fails only on a malformed endpoint.
	}
	return &ledgerFollower{Follower: progress.NewFollower(jc, brokerconn.Security{}, progress.App{Name: "ledger", Shards: sc}),
		conn: closer(members.Close)}
}

type closer func()

func (c closer) Close() error { c(); return nil }

// Close closes the follower's connections.
func (f *ledgerFollower) Close() { f.Follower.Close(); _ = f.conn.Close() }

// lag returns the bytes of its sources the ledger has yet to read.
func (f *ledgerFollower) lag(ctx context.Context) (int64, error) {
	var lastErr error
	for range 20 {
		var sts, err = f.Read(ctx)
		if err == nil {
			return sts[0].Lag, nil
		}
		lastErr = err
		if err = sleep(ctx, 100*time.Millisecond); err != nil {
			return 0, err
		}
	}
	return 0, fmt.Errorf("reading the ledger's lag: %w", lastErr)
}

// catchUp waits until the ledger and the leaderboard have read all their
// sources hold.
func catchUp(ctx context.Context, jc pb.RoutedJournalClient, ledger, leaderboard pb.Endpoint) error {
	var members = progress.NewMembers(brokerconn.Security{})
	defer members.Close()
	var lsc, err = members.Shards(ledger)
	if err != nil {
		return err
	}
	bsc, err := members.Shards(leaderboard)
	if err != nil {
		return err
	}
	var f = progress.NewFollower(jc, brokerconn.Security{}, progress.App{Name: "ledger", Shards: lsc}, progress.App{Name: "leaderboard", Shards: bsc})
	defer f.Close()
	// The ledger may still have minutes of its backlog to work through
	// (a load of 4,000,000 messages left it 5 minutes of it).
	var waitCtx, cancel = context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	var done = make(chan struct{})
	close(done)
	if _, err = f.Wait(waitCtx, 250*time.Millisecond, done, nil); err != nil {
		return fmt.Errorf("waiting for the consumers to catch up: %w", err)
	}
	return nil
}

// sample is a reading of the ledger's progress.
type sample struct {
	t      time.Time
	pid    int     // Of the member's process read.
	events int64   // Bytes of the BalanceChanged journals.
	read   float64 // Sum of the member's gazconsumer_shard_messages_total.
	cpu    float64 // CPU seconds of the member's process.
}

// sampler samples the ledger's progress every 100ms.
type sampler struct {
	jc      pb.RoutedJournalClient
	members *progress.Members
	mu      sync.Mutex
	m       *member // Nil while paused.
	samples []sample
	stop    chan struct{}
	done    chan struct{}
}

func newSampler(jc pb.RoutedJournalClient, m *member) *sampler {
	var s = &sampler{jc: jc, members: progress.NewMembers(brokerconn.Security{}), m: m, stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *sampler) loop() {
	defer close(s.done)
	var ticker = time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-ticker.C:
		}
		s.mu.Lock()
		var m = s.m
		s.mu.Unlock()
		if m == nil {
			continue
		}
		var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
		var x = sample{t: time.Now(), pid: m.pid()}
		var err error
		x.events, err = s.eventBytesNow(ctx)
		if err == nil {
			var metrics progress.Metrics
			if metrics, err = s.members.Metrics(ctx, m.endpoint()); err == nil {
				x.read = metrics.Value(progress.MessagesTotal)
			}
		}
		x.cpu = procCPU(x.pid)
		cancel()
		if err != nil {
			continue // The member restarting, say.
		}
		s.mu.Lock()
		s.samples = append(s.samples, x)
		s.mu.Unlock()
	}
}

// eventBytesNow returns the bytes of the BalanceChanged journals.
func (s *sampler) eventBytesNow(ctx context.Context) (int64, error) {
	var total int64
	for i := range 2 {
		var head, err = progress.WriteHead(ctx, s.jc, pb.Journal(fmt.Sprintf("%spart-%02d", eventsPrefix, i)))
		if err != nil {
			return 0, err
		}
		total += head
	}
	return total, nil
}

// pause stops sampling, and resume resumes it, of m.
func (s *sampler) pause() { s.mu.Lock(); s.m = nil; s.mu.Unlock() }

func (s *sampler) resume(m *member) { s.mu.Lock(); s.m = m; s.mu.Unlock() }

func (s *sampler) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
		<-s.done
		s.members.Close()
	}
}

// around returns the last sample at or before t and the first at or after
// u, of one process.
func (s *sampler) around(t, u time.Time) (a, b sample, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ai, bi = -1, -1
	for i, x := range s.samples {
		if !x.t.After(t) {
			ai = i
		}
		if bi == -1 && !x.t.Before(u) {
			bi = i
		}
	}
	if ai == -1 || bi == -1 || s.samples[ai].pid != s.samples[bi].pid || bi <= ai {
		return a, b, false
	}
	return s.samples[ai], s.samples[bi], true
}

// rate returns the rate of f over [t, u], from the samples nearest outside.
func (s *sampler) rate(t, u time.Time, f func(sample) float64) float64 {
	var a, b, ok = s.around(t, u)
	if !ok {
		return 0
	}
	return (f(b) - f(a)) / b.t.Sub(a.t).Seconds()
}

// minRate returns the lowest rate of f over spans of at least d in [t, u],
// or, if [t, u] holds no span of d between two samples, its rate over
// [t, u].
func (s *sampler) minRate(t, u time.Time, d time.Duration, f func(sample) float64) float64 {
	s.mu.Lock()
	var xs = append([]sample(nil), s.samples...)
	s.mu.Unlock()
	var low = -1.0
	for i, a := range xs {
		if a.t.Before(t) {
			continue
		}
		for _, b := range xs[i+1:] {
			if b.t.After(u) {
				break
			}
			if b.t.Sub(a.t) >= d {
				if r := (f(b) - f(a)) / b.t.Sub(a.t).Seconds(); low < 0 || r < low {
					low = r
				}
				break
			}
		}
	}
	if low < 0 {
		return s.rate(t, u, f)
	}
	return max(low, 0)
}

// writeCSV writes the samples to file: seconds from the split's start,
// events written (bytes over eventBytes), messages read, member CPU seconds.
func (s *sampler) writeCSV(file string, split time.Time, eventBytes float64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	b.WriteString("seconds_from_split,events,messages_read,member_cpu_seconds,pid\n")
	for _, x := range s.samples {
		fmt.Fprintf(&b, "%.3f,%.0f,%.0f,%.2f,%d\n", x.t.Sub(split).Seconds(), float64(x.events)/eventBytes, x.read, x.cpu, x.pid)
	}
	return os.WriteFile(file, []byte(b.String()), 0o644)
}

// selfCPU is the CPU seconds this process has used.
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func lastLine(s string) string {
	var lines = strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// window waits out a window of c.before, the member's CPU profiled over it
// to file if c.windows.
func (c *config) window(ctx context.Context, m *member, file string) error {
	if !c.windows {
		return sleep(ctx, c.before)
	}
	return m.profile(ctx, c.before, file)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
