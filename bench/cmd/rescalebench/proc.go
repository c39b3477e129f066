package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/consumer/shardspace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"gopkg.in/yaml.v2"
)

// build builds the example's ledger, leaderboard and bankctl, and
// gazconsumer, from the main module at root into bin.
func build(ctx context.Context, root, bin string) error {
	var cmd = exec.CommandContext(ctx, "go", "build", "-o", bin+string(filepath.Separator),
		"./example/cmd/ledger", "./example/cmd/leaderboard", "./example/cmd/bankctl", "./cmd/gazconsumer")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	return nil
}

// grownFamily matches the partitions of the Order and Payment families in
// the example's .proto files.
var grownFamily = regexp.MustCompile(`(name: "bank/(?:orders|payments)/"\s*\n\s*partitions: )2\b`)

// grownProtos copies the example's .proto files under root into dir, the
// Order and Payment families grown from 2 partitions to 4, and returns dir.
func grownProtos(root, dir string) (string, error) {
	var src = filepath.Join(root, "example", "proto")
	var grown int
	var err = filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		var b, rerr = os.ReadFile(p)
		if rerr != nil {
			return rerr
		}
		grown += len(grownFamily.FindAllIndex(b, -1))
		b = grownFamily.ReplaceAll(b, []byte("${1}4"))
		var to = filepath.Join(dir, strings.TrimPrefix(p, src))
		if err = os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		return "", fmt.Errorf("copying the example's .proto files: %w", err)
	} else if grown != 2 {
		return "", fmt.Errorf("found %d of the Order and Payment families' `partitions: 2` in %s, want 2", grown, src)
	}
	return dir, nil
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (string, error) {
	var l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// member is a process of one of the example's consumers: each start is a
// new member, with an ID and a state directory of its own, on the same port.
type member struct {
	app     string
	bin     string
	dir     string // Of its logs and state directories.
	port    string
	args    []string
	n       int // Processes started.
	id      string
	log     string // File of the current process's logs.
	cmd     *exec.Cmd
	started time.Time
	exited  chan error
	cpu     float64 // CPU seconds of the processes which exited.
}

// newMember returns a member of app, not started, whose processes take
// args too and keep their files under dir.
func newMember(bin, dir, app string, args ...string) (*member, error) {
	var port, err = freePort()
	if err != nil {
		return nil, err
	}
	return &member{app: app, bin: bin, dir: dir, port: port, args: args}, nil
}

// endpoint is the member's address.
func (m *member) endpoint() pb.Endpoint { return pb.Endpoint("http://127.0.0.1:" + m.port) }

// start starts a new process of the member and waits until it serves.
func (m *member) start(ctx context.Context) error {
	m.n++
	m.id = fmt.Sprintf("%s-%d", m.app, m.n)
	var state = m.state()
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	m.log = filepath.Join(m.dir, m.id+".log")
	var logs, err = os.Create(m.log)
	if err != nil {
		return err
	}
	defer logs.Close()
	m.cmd = exec.Command(filepath.Join(m.bin, m.app), append([]string{
		"--consumer.host", "127.0.0.1", "--consumer.port", m.port, "--consumer.id", m.id,
		"--consumer.state-dir", state,
	}, m.args...)...)
	m.cmd.Stdout, m.cmd.Stderr = logs, logs
	m.started = time.Now()
	if err = m.cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", m.id, err)
	}
	var cmd, exited = m.cmd, make(chan error, 1)
	m.exited = exited
	go func() { exited <- cmd.Wait() }()
	for {
		var conn, err = net.DialTimeout("tcp", "127.0.0.1:"+m.port, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case err = <-exited:
			m.exited = nil
			return fmt.Errorf("%s exited before serving: %v\n%s", m.id, err, m.tail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// profile writes to file a CPU profile of the member's current process,
// of d from now, served at /debug/pprof/profile of its port.
func (m *member) profile(ctx context.Context, d time.Duration, file string) error {
	var url = fmt.Sprintf("http://127.0.0.1:%s/debug/pprof/profile?seconds=%d", m.port, int(d.Round(time.Second)/time.Second))
	var req, err = http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profiling %s: %w", m.id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var b, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("profiling %s: %s: %s", m.id, resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err = io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profiling %s: %w", m.id, err)
	}
	return f.Close()
}

// state is the state directory of the current process.
func (m *member) state() string { return filepath.Join(m.dir, m.id) }

// pid is the current process's id.
func (m *member) pid() int { return m.cmd.Process.Pid }

// wait waits for the current process to exit, and adds up its CPU.
func (m *member) wait(d time.Duration) error {
	if m.exited == nil {
		return nil
	}
	select {
	case err := <-m.exited:
		m.exited = nil
		m.cpu += cpuOf(m.cmd.ProcessState)
		return err
	case <-time.After(d):
		return fmt.Errorf("%s did not exit within %s", m.id, d)
	}
}

// kill kills the current process with SIGKILL, as a crash would.
func (m *member) kill() error {
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("killing %s: %w", m.id, err)
	}
	if err := m.wait(time.Minute); err != nil && !isSignaled(err) {
		return err
	}
	return nil
}

// stop stops the current process with SIGTERM, if it runs.
func (m *member) stop() error {
	if m.cmd == nil || m.exited == nil {
		return nil
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	if err := m.wait(time.Minute); err != nil {
		_ = m.cmd.Process.Kill()
		_ = m.wait(time.Minute)
		return fmt.Errorf("stopping %s: %w", m.id, err)
	}
	return nil
}

// tail returns the end of the current process's logs.
func (m *member) tail() string {
	var b, _ = os.ReadFile(m.log)
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

func isSignaled(err error) bool {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return true
		}
	}
	return false
}

// cpuOf is the CPU seconds, user and system, of an exited process.
func cpuOf(ps *os.ProcessState) float64 {
	if ps == nil {
		return 0
	}
	return (ps.UserTime() + ps.SystemTime()).Seconds()
}

// procCPU is the CPU seconds, user and system, a running process has used
// so far (from /proc; 0 if it can't be read).
func procCPU(pid int) float64 {
	var b, err = os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command's name, in parentheses, may hold spaces: fields count
	// from its end. utime and stime are fields 14 and 15.
	var i = strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	var f = strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var ut, _ = strconv.ParseFloat(f[11], 64)
	var st, _ = strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ, 100 on Linux.
}

// applyShards applies the shards of a gazctl shard-spec file through the
// Shard API of the member, as `gazctl shards apply` does.
func applyShards(ctx context.Context, ep pb.Endpoint, file string) error {
	var b, err = os.ReadFile(file)
	if err != nil {
		return err
	}
	var set shardspace.Set
	if err = yaml.UnmarshalStrict(b, &set); err != nil {
		return fmt.Errorf("decoding %s: %w", file, err)
	}
	set.PushDown()
	var req pc.ApplyRequest
	for _, sh := range set.Shards {
		req.Changes = append(req.Changes, pc.ApplyRequest_Change{Upsert: &sh.Spec, ExpectModRevision: sh.Revision})
	}
	conn, err := grpc.NewClient(ep.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	resp, err := pc.NewAuthShardClient(pc.NewShardClient(conn), auth.NewNoopAuth()).Apply(ctx, &req)
	if err == nil && resp.Status != pc.Status_OK {
		err = fmt.Errorf("%s: %s", resp.Status, resp.Extension)
	}
	if err != nil {
		return fmt.Errorf("applying the shards of %s to %s: %w", file, ep, err)
	}
	return nil
}

// logLine is a line of a member's JSON logs, with the fields read here.
type logLine struct {
	Time      time.Time `json:"time"`
	Msg       string    `json:"msg"`
	Shard     string    `json:"shard"`
	Journal   string    `json:"journal"`
	BytesRead int64     `json:"bytesRead"`
	Took      int64     `json:"took"` // Nanoseconds.
	Dir       string    `json:"dir"`
	Through   *float64  `json:"through"` // Of a drop's batch, at the debug level.
}

// shardLog is what a member's logs say of a shard.
type shardLog struct {
	fenced    int64         // Bytes read by the recovery which fenced its log, if any.
	forked    int64         // Bytes of the parent's log read by its fork, if any.
	forkTook  time.Duration // Time of its fork's playback and Fork, or read of its parent's store.
	forkSeen  bool          // It forked.
	local     bool          // It forked from its parent's store, in its member.
	linked    time.Time     // When it began to link its parent's files, if it did.
	ended     time.Time     // When it ended its rescale: it dropped what it no longer owns.
	compacted time.Time     // When its store last compacted its files (as its rescale ended).
	// Of its drop of what it no longer owns, once its rescale ended: when
	// it began and ended, and how far it said it had gone after each batch
	// (at the debug level).
	dropBegan, dropped time.Time
	through            []progressAt
}

// progressAt is how far a drop said it had gone, at a time.
type progressAt struct {
	at      time.Time
	through float64
}

// dropHalfway returns how far the shard's drop said it had gone halfway
// through its time, between the reports either side (from 0 as it began,
// to 1 as it ended), and whether it reported its progress.
func (s *shardLog) dropHalfway() (float64, bool) {
	if s.dropBegan.IsZero() || s.dropped.IsZero() || len(s.through) == 0 {
		return 0, false
	}
	var half = s.dropBegan.Add(s.dropped.Sub(s.dropBegan) / 2)
	var points = append(append([]progressAt{{s.dropBegan, 0}}, s.through...), progressAt{s.dropped, 1})
	for i := 1; i < len(points); i++ {
		var a, b = points[i-1], points[i]
		if b.at.Before(half) {
			continue
		} else if span := b.at.Sub(a.at); span > 0 {
			return a.through + (b.through-a.through)*float64(half.Sub(a.at))/float64(span), true
		}
		return b.through, true
	}
	return 1, true
}

// awaitLogged waits until the member's log, file, says of each of shards
// the time at returns (non-zero), and returns the last of them. what names
// it in an error.
func awaitLogged(ctx context.Context, file string, shards []string, what string, at func(*shardLog) time.Time) (time.Time, error) {
	var deadline = time.Now().Add(5 * time.Minute)
	for {
		var logs, err = readLog(file)
		if err != nil {
			return time.Time{}, err
		}
		var last time.Time
		var waiting []string
		for _, s := range shards {
			if l := logs[s]; l == nil || at(l).IsZero() {
				waiting = append(waiting, s)
			} else if at(l).After(last) {
				last = at(l)
			}
		}
		if len(waiting) == 0 {
			return last, nil
		} else if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("shards %v did not %s within 5m", waiting, what)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// readLog reads the JSON logs of a member's process, by shard.
func readLog(file string) (map[string]*shardLog, error) {
	var f, err = os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out = map[string]*shardLog{}
	var of = func(shard string) *shardLog {
		if out[shard] == nil {
			out[shard] = new(shardLog)
		}
		return out[shard]
	}
	var sc = bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l.Msg {
		case "recovery log fenced":
			of(path.Base(l.Journal)).fenced += l.BytesRead
		case "shard forked":
			var s = of(l.Shard)
			s.forked, s.forkTook, s.forkSeen = l.BytesRead, time.Duration(l.Took), true
		case "shard forked from the store of its parent's primary, in this member",
			"shard forked from links of the files of its parent's primary, in this member":
			var s = of(l.Shard)
			s.forkTook, s.forkSeen, s.local = time.Duration(l.Took), true, true
		case "shard linked the files of its parent's primary, in this member":
			// Before its store opened; it forks once that's open.
			of(l.Shard).linked = l.Time.Add(-time.Duration(l.Took))
		case "shard ended its rescale":
			of(l.Shard).ended = l.Time
		case "shard's rescale ended: it drops what it no longer owns":
			of(l.Shard).dropBegan = l.Time
		case "shard dropped part of what it no longer owns":
			if l.Through != nil && *l.Through >= 0 {
				var s = of(l.Shard)
				s.through = append(s.through, progressAt{l.Time, *l.Through})
			}
		case "shard dropped what it no longer owns":
			of(l.Shard).dropped = l.Time
		case "store compacted its files":
			// Its directory is the shard's id, then "-" and a revision.
			var base = filepath.Base(l.Dir)
			if i := strings.LastIndex(base, "-"); i > 0 {
				of(base[:i]).compacted = l.Time
			}
		case "shard forked from links of its parent's files":
			if s := of(l.Shard); !s.linked.IsZero() {
				s.forkTook, s.forkSeen, s.local = l.Time.Sub(s.linked), true, true
			}
		}
	}
	return out, sc.Err()
}

// command runs a command to its end, its output into file, and returns
// its CPU seconds. If stamped, each line of the file begins with the
// seconds from the command's start to the line's write: the timeline of
// the command's steps.
func command(ctx context.Context, file string, stamped bool, name string, args ...string) (float64, error) {
	var f, err = os.Create(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var out io.Writer = f
	var cmd = exec.CommandContext(ctx, name, args...)
	if stamped {
		out = &stampWriter{w: f, start: time.Now()}
	}
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	if sw, ok := out.(*stampWriter); ok && len(sw.partial) != 0 {
		sw.Write([]byte{'\n'}) // A last line not ended.
	}
	if err != nil {
		var b, _ = os.ReadFile(file)
		if len(b) > 4096 {
			b = b[len(b)-4096:]
		}
		return cpuOf(cmd.ProcessState), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), args[0], err, b)
	}
	return cpuOf(cmd.ProcessState), nil
}

// stampWriter writes to w each line written to it, after the seconds from
// start to the write which ended the line.
type stampWriter struct {
	w       io.Writer
	start   time.Time
	partial []byte // Of a line not ended yet.
}

func (s *stampWriter) Write(p []byte) (int, error) {
	var n = len(p)
	for len(p) != 0 {
		var i = bytes.IndexByte(p, '\n')
		if i < 0 {
			s.partial = append(s.partial, p...)
			break
		}
		var line = append(s.partial, p[:i+1]...)
		s.partial, p = s.partial[:0], p[i+1:]
		if _, err := fmt.Fprintf(s.w, "%7.3fs  %s", time.Since(s.start).Seconds(), line); err != nil {
			return 0, err
		}
	}
	return n, nil
}
