package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/gazconsumer/gazconsumer/bench/internal/profile"
	"github.com/gazconsumer/gazconsumer/bench/internal/workload"
	"go.gazette.dev/core/auth"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// member is a consumer of one side running in a process of its own, as
// the only member of its run's consumer group.
type member struct {
	r      workload.Run
	cmd    *exec.Cmd
	port   string
	state  string // Its state directory, removed by close.
	logs   *os.File
	exited chan error
	conn   *grpc.ClientConn
	sc     pc.ShardClient

	stopped bool // Whether cmd has exited and was waited for.
	failed  bool // Whether its logs are shown by close.
}

// startMember starts a member of run r's side and waits until it serves.
// prof, if set, is where its CPU profile is written. The member must be
// closed.
func startMember(ctx context.Context, c config, env stackEnv, r workload.Run, prof string) (_ *member, err error) {
	p, err := freePort()
	if err != nil {
		return nil, err
	}
	var m = &member{r: r, port: strconv.Itoa(p), state: filepath.Join(env.dir, "consumers", r.String()), exited: make(chan error, 1)}
	if err = os.MkdirAll(m.state, 0o755); err != nil {
		return nil, err
	}
	switch side := r.Side; {
	case c.builds[side] != "":
		m.cmd = exec.Command(c.builds[side],
			"--etcd.address", env.etcd, "--etcd.prefix", r.EtcdPrefix(), "--broker.address", env.broker,
			"--consumer.host", "127.0.0.1", "--consumer.port", m.port, "--consumer.id", r.String(),
			"--consumer.state-dir", m.state, "--log.level", "warn")
	case side == "ours" || side == "ours-reflect" || side == "ours-agg":
		// bin/summer is built as generated, with the codecs of
		// protoc-gen-gazconsumer (vtprotobuf's generator); bin/summer-novt
		// with the tag gazconsumer_novtproto, which has runtime/codec ignore
		// them, as for a consumer generated with codecs=none.
		var bin = "summer"
		if r.Side == "ours-reflect" {
			bin = "summer-novt"
		}
		m.cmd = exec.Command(filepath.Join(c.bin, bin),
			"--etcd.address", env.etcd, "--etcd.prefix", r.EtcdPrefix(), "--broker.address", env.broker,
			"--consumer.host", "127.0.0.1", "--consumer.port", m.port, "--consumer.id", r.String(),
			"--consumer.state-dir", m.state, "--log.level", "warn", fmt.Sprintf("--summer.aggregate=%t", r.Side == "ours-agg"))
	case side == "anchor":
		m.cmd = exec.Command(filepath.Join(c.bin, "anchor"), "serve",
			"--etcd.address", env.etcd, "--etcd.prefix", r.EtcdPrefix(), "--broker.address", env.broker,
			"--broker.cache.size", "0", "--consumer.host", "127.0.0.1", "--consumer.port", m.port,
			"--consumer.id", r.String(), "--log.level", "warn")
	default:
		return nil, fmt.Errorf("unknown side %q", side)
	}
	// Gazette plays recovery logs into a temporary directory. Its route
	// cache is off (--broker.cache.size 0), so that it reads its sources
	// through the broker as ours and the raw read do: with the cache on, it
	// asks for fragments to read directly, from a store it would need to be
	// given (--broker.file-root), and one broker routes nothing anyway.
	m.cmd.Env = append(os.Environ(), "TMPDIR="+m.state)
	if prof != "" {
		m.cmd.Env = append(m.cmd.Env, profile.Env+"="+prof)
	}
	// Its logs go to a file, shown if the run fails.
	if m.logs, err = os.Create(filepath.Join(env.dir, r.String()+".log")); err != nil {
		return nil, err
	}
	m.cmd.Stdout, m.cmd.Stderr = m.logs, m.logs
	if err = m.cmd.Start(); err != nil {
		m.logs.Close()
		return nil, fmt.Errorf("starting %s: %w", r, err)
	}
	go func() { m.exited <- m.cmd.Wait() }()
	defer func() {
		if err != nil {
			m.fail()
			m.close()
		}
	}()
	if m.conn, err = grpc.NewClient("127.0.0.1:"+m.port, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		return nil, err
	}
	m.sc = pc.NewAuthShardClient(pc.NewShardClient(m.conn), auth.NewNoopAuth())
	for {
		if _, err = m.sc.List(ctx, &pc.ListRequest{}); err == nil {
			return m, nil
		}
		select {
		case err = <-m.exited:
			m.stopped = true
			return nil, fmt.Errorf("%s exited before serving: %v", r, err)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// apply applies the run's shards of partitions 0 to n-1.
func (m *member) apply(ctx context.Context, n int) error {
	var req = new(pc.ApplyRequest)
	for i := range n {
		req.Changes = append(req.Changes, pc.ApplyRequest_Change{Upsert: m.r.ShardSpec(i), ExpectModRevision: 0})
	}
	var resp, err = m.sc.Apply(ctx, req)
	if err == nil && resp.Status != pc.Status_OK {
		err = errors.New(resp.Status.String())
	}
	if err != nil {
		return fmt.Errorf("applying the shards of %s: %w", m.r, err)
	}
	return nil
}

// waitReadThrough waits until the member's shard of each partition i has
// committed through heads[i].
func (m *member) waitReadThrough(ctx context.Context, heads []int64) error {
	for i, head := range heads {
		if err := waitReadThrough(ctx, m.sc, workload.ShardID(i), workload.Input(i), head, m.exited); err != nil {
			if errors.Is(err, errExited) {
				m.stopped = true
			}
			return fmt.Errorf("%s: %w", m.r, err)
		}
	}
	return nil
}

// stop deletes the member's n shards, which a lone Gazette member does not
// release, and stops it as a deployment would, with SIGTERM. It returns
// the CPU time the process used, all told.
func (m *member) stop(ctx context.Context, n int) (cpu float64, err error) {
	var del = new(pc.ApplyRequest)
	for i := range n {
		del.Changes = append(del.Changes, pc.ApplyRequest_Change{Delete: workload.ShardID(i), ExpectModRevision: -1})
	}
	resp, err := m.sc.Apply(ctx, del)
	if err == nil && resp.Status != pc.Status_OK {
		err = errors.New(resp.Status.String())
	}
	if err != nil {
		return 0, fmt.Errorf("deleting the shards of %s: %w", m.r, err)
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err = <-m.exited:
		m.stopped = true
		if err != nil {
			return 0, fmt.Errorf("%s exited on SIGTERM: %w", m.r, err)
		}
	case <-time.After(time.Minute):
		return 0, fmt.Errorf("%s did not exit within a minute of SIGTERM", m.r)
	}
	return cpuOf(m.cmd.ProcessState), nil
}

// fail has close show the member's logs.
func (m *member) fail() { m.failed = true }

// close kills the member if it still runs, shows its logs if it failed,
// and removes its state.
func (m *member) close() {
	if !m.stopped {
		_ = m.cmd.Process.Kill()
		<-m.exited
		m.stopped = true
	}
	if m.conn != nil {
		_ = m.conn.Close()
	}
	if m.failed {
		if b, err := os.ReadFile(m.logs.Name()); err == nil {
			fmt.Fprintf(os.Stderr, "--- logs of %s:\n%s--- end of logs of %s\n", m.r, tail(b, 4096), m.r)
		}
	}
	_ = m.logs.Close()
	_ = os.RemoveAll(m.state)
}
