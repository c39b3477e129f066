//go:build image

package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/specs"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// testImage is the image TestImageRunsAMember builds.
const testImage = "localhost/gazconsumer/ledger:image-test"

// TestImageRunsAMember builds deploy/Dockerfile with scripts/build-image.sh
// (buildah, without a Docker engine or a registry: its bases are made from
// Debian packages), starts the development stack, runs the example's ledger
// from the image (buildah run, chroot isolation, the host's network) as a
// member of it, applies the ledger's shards with the image's gazctl, checks
// that the member is primary of every shard and serves them and its
// metrics, then stops it with SIGTERM and checks that it exits cleanly.
//
// It needs root, buildah and mmdebstrap (scripts/setup.sh installs them),
// Debian's mirrors and the Go module proxy; `make test-image` runs it. The
// first build makes the bases and takes minutes; later ones reuse them and
// buildah's layers.
func TestImageRunsAMember(t *testing.T) {
	var root = repoRoot(t)
	for _, tool := range []string{"buildah", "mmdebstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s, which builds the image, is not installed (scripts/setup.sh installs it): %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Fatalf("building and running the image with buildah's chroot isolation needs root")
	}

	// Build.
	var start = time.Now()
	var build = exec.Command(filepath.Join(root, "scripts", "build-image.sh"), "-t", testImage)
	var buildLog bytes.Buffer
	var out io.Writer = &buildLog
	if testing.Verbose() {
		out = io.MultiWriter(&buildLog, os.Stderr) // Minutes of it, the first time.
	}
	build.Stdout, build.Stderr = out, out
	if err := build.Run(); err != nil {
		t.Fatalf("scripts/build-image.sh -t %s: %v\n%s", testImage, err, &buildLog)
	}
	t.Logf("built %s in %s", testImage, time.Since(start).Round(time.Second))
	var image struct {
		OCIv1 struct {
			Config struct {
				User       string   `json:"User"`
				Entrypoint []string `json:"Entrypoint"`
			} `json:"config"`
		}
	}
	if out, err := exec.Command("buildah", "inspect", "--type", "image", testImage).Output(); err != nil {
		t.Fatalf("buildah inspect %s: %v", testImage, err)
	} else if err = json.Unmarshal(out, &image); err != nil {
		t.Fatalf("buildah inspect %s: %v", testImage, err)
	}
	var entrypoint = image.OCIv1.Config.Entrypoint
	if len(entrypoint) == 0 {
		t.Fatalf("%s has no entrypoint", testImage)
	}
	t.Logf("%s: user %q, entrypoint %q", testImage, image.OCIv1.Config.User, entrypoint)

	// The stack, with the example's journals.
	var ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stack = devstacktest.StartT(t, "")
	if _, err := specs.ApplyJournalsFile(ctx, stack.Journals(), filepath.Join(root, "example", "specs", "journals.yaml")); err != nil {
		t.Fatal(err)
	}
	var broker = string(stack.Brokers()[0].Endpoint())

	// A working container of the image, in which the member and gazctl run.
	var ctr = fmt.Sprintf("gazconsumer-image-test-%d", os.Getpid())
	if out, err := exec.Command("buildah", "from", "--quiet", "--pull=never", "--name", ctr, testImage).CombinedOutput(); err != nil {
		t.Fatalf("buildah from %s: %v\n%s", testImage, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("buildah", "rm", ctr).CombinedOutput(); err != nil {
			t.Errorf("buildah rm %s: %v\n%s", ctr, err, out)
		}
	})
	var run = func(ctx context.Context, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, "buildah", append([]string{"run", "--isolation", "chroot", "--net", "host", ctr, "--"}, args...)...)
	}

	// The member: the image's entrypoint, as the manifests run it.
	var port = freeLoopbackPort(t)
	var address = "http://127.0.0.1:" + port
	var member = run(context.Background(), append(entrypoint,
		"--consumer.host", "127.0.0.1",
		"--consumer.port", port,
		"--consumer.id", "image-test",
		"--consumer.state-dir", "/home/gazconsumer/state",
		"--etcd.address", stack.EtcdURL(),
		"--etcd.lease", "2s",
		"--broker.address", broker,
		"--log.level", "info",
	)...)
	var memberLog syncBuffer
	member.Stdout, member.Stderr = &memberLog, &memberLog
	if err := member.Start(); err != nil {
		t.Fatalf("buildah run %s: %v", ctr, err)
	}
	var exited = make(chan error, 1)
	go func() { exited <- member.Wait() }()
	var stopped bool
	defer func() {
		if !stopped {
			_ = member.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("the member logged:\n%s", memberLog.String())
		}
	}()

	for {
		var conn, err = net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("the member exited before it served: %v", err)
		case <-ctx.Done():
			t.Fatalf("the member does not serve on port %s: %v", port, err)
		case <-time.After(100 * time.Millisecond):
		}
	}

	// Its shards, applied with the image's gazctl through the member.
	var shardSpecs, err = os.ReadFile(filepath.Join(root, "example", "specs", "ledger-shards.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var apply = run(ctx, "/usr/local/bin/gazctl", "shards", "apply", "--specs", "-",
		"--consumer.address", address, "--broker.address", broker)
	apply.Stdin = bytes.NewReader(shardSpecs)
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("gazctl shards apply (in the image): %v\n%s", err, out)
	}
	var want = strings.Count(string(shardSpecs), "\n- id: ")

	// Every shard gets the member as its primary, and serves: Stat answers.
	conn, err := grpc.NewClient("127.0.0.1:"+port, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var shards = pc.NewShardClient(conn)
	for {
		var primaries, last = 0, ""
		var resp, err = shards.List(ctx, &pc.ListRequest{})
		if err == nil {
			for _, s := range resp.Shards {
				if s.Route.Primary >= 0 && s.Route.Members[s.Route.Primary].Suffix == "image-test" &&
					s.Status[s.Route.Primary].Code == pc.ReplicaStatus_PRIMARY {
					primaries++
				}
				last += fmt.Sprintf(" %s:%v", s.Spec.Id, s.Status)
			}
		} else {
			last = err.Error()
		}
		if primaries == want && len(resp.Shards) == want {
			t.Logf("the member is primary of its %d shards:%s", want, last)
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the member is primary of %d of %d shards:%s", primaries, want, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
	var list, _ = shards.List(ctx, &pc.ListRequest{})
	for _, s := range list.Shards {
		if resp, err := shards.Stat(ctx, &pc.StatRequest{Shard: s.Spec.Id}); err != nil || resp.Status != pc.Status_OK {
			t.Errorf("Stat of %s: %v %v", s.Spec.Id, resp, err)
		}
	}
	if resp, err := http.Get(address + "/metrics"); err != nil {
		t.Errorf("GET /metrics: %v", err)
	} else {
		var body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Contains(body, []byte("gazette_shard_up")) {
			t.Errorf("GET /metrics (%s) has no gazette_shard_up:\n%.2000s", resp.Status, body)
		}
	}

	// SIGTERM, as a container runtime stops the container: to the member's
	// own process. (buildah run, given SIGTERM itself, kills its command with
	// SIGKILL.) The member hands off its shards (to no one here, so within
	// --consumer.handoff) and exits with 0, and buildah run with it.
	var pid, found = descendantNamed(member.Process.Pid, "consumer")
	if !found {
		t.Fatalf("no process named consumer under buildah run (process %d)", member.Process.Pid)
	}
	// It runs as the image's user, as the manifests' runAsUser has it.
	var status, _ = os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	var uid, _, _ = strings.Cut(image.OCIv1.Config.User, ":")
	if !regexp.MustCompile(`(?m)^Uid:\s+` + regexp.QuoteMeta(uid) + `\s`).Match(status) {
		t.Errorf("the member does not run as the image's user %s:\n%s", image.OCIv1.Config.User, status)
	}
	start = time.Now()
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("the member exited on SIGTERM with %v", err)
		} else {
			t.Logf("the member exited on SIGTERM after %s", time.Since(start).Round(time.Millisecond))
		}
	case <-time.After(time.Minute):
		t.Errorf("the member did not exit within a minute of SIGTERM")
	}
}

// descendantNamed returns the first process found below process parent
// whose command name (/proc/PID/comm) is name.
func descendantNamed(parent int, name string) (int, bool) {
	var entries, _ = os.ReadDir("/proc")
	var children = map[int][]int{}
	for _, e := range entries {
		var pid, err = strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// /proc/PID/stat: "PID (comm) state PPID ...", comm may hold spaces.
		var stat, _ = os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		var i = bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		var fields = strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var queue = []int{parent}
	for len(queue) != 0 {
		var pid = queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			var comm, _ = os.ReadFile(filepath.Join("/proc", strconv.Itoa(c), "comm"))
			if strings.TrimSpace(string(comm)) == name {
				return c, true
			}
			queue = append(queue, c)
		}
	}
	return 0, false
}

// freeLoopbackPort returns a loopback port that was free a moment ago.
func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	var l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// syncBuffer is a bytes.Buffer that two goroutines may write and read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
