//go:build multihost

package multihost_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devcerts"
)

// The hosts of the test, each a network namespace on a bridge, with its
// address on the test's subnet. The test process runs on the bridge's own
// address, subnet.1.
const (
	bridge = "gzmh0"
	subnet = "10.231.77"
	etcdNS = "gzmh-etcd"
)

var (
	brokerHosts = []string{"gzmh-b1", "gzmh-b2", "gzmh-b3"}
	memberHosts = []string{"gzmh-m1", "gzmh-m2"}
)

// hostIP is the address of host i of the subnet.
func hostIP(i int) string { return fmt.Sprintf("%s.%d", subnet, i) }

// network is the test's hosts.
type network struct {
	t     *testing.T
	hosts map[string]string // Namespace to address.
}

// run runs a command, failing the test with its output on error.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// newNetwork makes a bridge and a namespace per host, linked to it by a
// veth pair, and removes them when the test ends.
func newNetwork(t *testing.T, hosts map[string]string) *network {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatalf("the multi-host test makes network namespaces, which needs root (it runs as uid %d): run it as root, as CI does", os.Geteuid())
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("the multi-host test needs iproute2's ip command: %v", err)
	}
	var n = &network{t: t, hosts: hosts}
	n.teardown() // What a killed earlier run left.
	t.Cleanup(n.teardown)

	run(t, "ip", "link", "add", bridge, "type", "bridge")
	run(t, "ip", "addr", "add", hostIP(1)+"/24", "dev", bridge)
	run(t, "ip", "link", "set", bridge, "up")
	for ns, ip := range hosts {
		run(t, "ip", "netns", "add", ns)
		run(t, "ip", "link", "add", n.link(ns), "type", "veth", "peer", "name", "eth0", "netns", ns)
		run(t, "ip", "link", "set", n.link(ns), "master", bridge, "up")
		run(t, "ip", "-n", ns, "addr", "add", ip+"/24", "dev", "eth0")
		run(t, "ip", "-n", ns, "link", "set", "eth0", "up")
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
		// Gazette's brokers use no keepalive on their connections to each
		// other: a connection to a host that vanished without closing it
		// (a power loss, a cut link) fails only when the kernel gives up
		// retransmitting, about 15 minutes by default, and appends proxied
		// or replicated through it stall until then. A host of a deployment
		// is tuned so that it gives up in about 12 s (docs/deploy.md).
		run(t, "ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.tcp_retries2=5")
	}
	return n
}

// link is the bridge's end of the veth pair of host ns.
func (n *network) link(ns string) string { return "v" + strings.TrimPrefix(ns, "gzmh-") }

func (n *network) teardown() {
	for ns := range n.hosts {
		_ = exec.Command("ip", "netns", "del", ns).Run()
		_ = exec.Command("ip", "link", "del", n.link(ns)).Run()
	}
	_ = exec.Command("ip", "link", "del", bridge).Run()
}

// setLink takes host ns off the network, or puts it back.
func (n *network) setLink(ns string, up bool) {
	var state = "down"
	if up {
		state = "up"
	}
	run(n.t, "ip", "link", "set", n.link(ns), state)
}

// proc is a process on a host.
type proc struct {
	t    *testing.T
	name string
	ns   string
	bin  string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	log  *bytes.Buffer
	done chan error
	runs int
}

func (p *proc) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.runs++
	p.log = new(bytes.Buffer)
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", p.ns, p.bin}, p.args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatalf("starting %s on %s: %v", p.name, p.ns, err)
	}
	var done = make(chan error, 1)
	p.done = done
	var cmd = p.cmd
	go func() { done <- cmd.Wait() }()
}

// signal sends sig to the process (ip netns exec execs it: its pid is the
// process's own).
func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.cmd.Process.Signal(sig)
}

// wait waits up to d for the process to exit, and returns its exit code, or
// -1 if it is still running.
func (p *proc) wait(d time.Duration) int {
	select {
	case err := <-p.done:
		p.done <- err // Keep it for a later wait.
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		} else if err != nil {
			return -2
		}
		return 0
	case <-time.After(d):
		return -1
	}
}

// stop stops the process with SIGTERM (SIGKILL after d) if it is running.
func (p *proc) stop(d time.Duration) {
	if p.wait(0) != -1 {
		return
	}
	p.signal(syscall.SIGTERM)
	if p.wait(d) == -1 {
		p.signal(syscall.SIGKILL)
		p.wait(time.Minute)
	}
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// waitTCP waits until addr accepts connections.
func waitTCP(ctx context.Context, t *testing.T, addr string, p *proc) {
	t.Helper()
	for {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			return
		}
		if code := p.wait(0); code != -1 {
			t.Fatalf("%s exited with %d before serving on %s:\n%s", p.name, code, addr, p.output())
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s does not serve on %s:\n%s", p.name, addr, p.output())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// TestMultiHost runs the example bank across hosts, secured, through faults:
// etcd on a host of its own, three brokers replicating every journal twice,
// and the ledger and the leaderboard on two member hosts, every connection
// over mutual TLS and every call authorized. While bankctl publishes, a
// broker host goes down, a member host is cut off for longer than its
// members' etcd lease (they exit with code 3, as they must, and a
// supervisor, the test, restarts them once the link is back), and the other
// member host's members are killed with SIGKILL and restarted. bankctl check
// then finds the state exact and every event read once.
func TestMultiHost(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	var repo, err = filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var gazctl = filepath.Join(repo, ".tools/bin/gazctl")
	if _, err = os.Stat(gazctl); err != nil {
		t.Fatalf("gazctl is not installed (run scripts/setup.sh): %v", err)
	}

	// Binaries: the brokers are Gazette's own, built from go.mod.
	var bin = t.TempDir()
	var build = exec.Command("go", "build", "-o", bin+string(filepath.Separator),
		"go.gazette.dev/core/cmd/gazette", "./cmd/gazconsumer", "./example/cmd/ledger", "./example/cmd/leaderboard", "./example/cmd/bankctl")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}

	var hosts = map[string]string{etcdNS: hostIP(10)}
	for i, h := range brokerHosts {
		hosts[h] = hostIP(11 + i)
	}
	for i, h := range memberHosts {
		hosts[h] = hostIP(21 + i)
	}
	var netw = newNetwork(t, hosts)

	// TLS: one CA; a certificate per host, for its address (serving, and as
	// the client certificate of its own calls); one for the test's clients.
	var dir = t.TempDir()
	ca, err := devcerts.NewCA(dir, "multihost")
	if err != nil {
		t.Fatal(err)
	}
	var certs = map[string]devcerts.Pair{}
	for ns, ip := range hosts {
		if certs[ns], err = ca.Issue(dir, ns, ip); err != nil {
			t.Fatal(err)
		}
	}
	operator, err := ca.Issue(dir, "operator", hostIP(1))
	if err != nil {
		t.Fatal(err)
	}
	var keyBytes = make([]byte, 32)
	if _, err = rand.Read(keyBytes); err != nil {
		t.Fatal(err)
	}
	var authKey = base64.StdEncoding.EncodeToString(keyBytes)
	var etcdURL = "https://" + hostIP(10) + ":2379"
	var entryBroker = "https://" + hostIP(11) + ":8080" // b1 stays up.

	var procs []*proc
	var newProc = func(name, ns, binary string, args ...string) *proc {
		var p = &proc{t: t, name: name, ns: ns, bin: filepath.Join(bin, binary), args: args}
		procs = append(procs, p)
		p.start()
		return p
	}
	defer func() {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop(30 * time.Second)
			if t.Failed() {
				t.Logf("%s on %s (run %d) logged:\n%s", procs[i].name, procs[i].ns, procs[i].runs, procs[i].output())
			}
		}
	}()

	// etcd 3.6, a process of its own.
	var etcd = newProc("etcd", etcdNS, "gazconsumer", "etcd", "--name", "etcd", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--listen-peer-urls", "http://127.0.0.1:2380",
		"--cert-file", certs[etcdNS].CertFile, "--key-file", certs[etcdNS].KeyFile, "--trusted-ca-file", ca.CertFile, "--log-level", "error")
	waitTCP(ctx, t, hostIP(10)+":2379", etcd)

	// Three brokers; fragments persist to a directory they share (the
	// hosts share this machine's disk).
	var fragments = filepath.Join(dir, "fragments")
	if err = os.MkdirAll(fragments, 0o755); err != nil {
		t.Fatal(err)
	}
	var etcdClientFlags = func(ns string) []string {
		return []string{"--etcd.address", etcdURL, "--etcd.cert-file", certs[ns].CertFile, "--etcd.cert-key-file", certs[ns].KeyFile, "--etcd.trusted-ca-file", ca.CertFile}
	}
	var brokers []*proc
	for i, ns := range brokerHosts {
		var args = append([]string{"serve",
			"--broker.zone", "local", "--broker.id", ns, "--broker.host", hosts[ns], "--broker.port", "8080",
			"--broker.server-cert-file", certs[ns].CertFile, "--broker.server-cert-key-file", certs[ns].KeyFile, "--broker.server-ca-file", ca.CertFile,
			"--broker.peer-cert-file", certs[ns].CertFile, "--broker.peer-cert-key-file", certs[ns].KeyFile, "--broker.peer-ca-file", ca.CertFile,
			"--broker.auth-keys", authKey, "--broker.file-root", fragments, "--etcd.lease", "5s", "--log.level", "warn",
		}, etcdClientFlags(ns)...)
		brokers = append(brokers, newProc(fmt.Sprintf("broker %d", i+1), ns, "gazette", args...))
	}
	for i, b := range brokers {
		waitTCP(ctx, t, hostIP(11+i)+":8080", b)
	}

	// The operator's environment: gazctl and bankctl, on the test's host.
	var opEnv = append(os.Environ(),
		"BROKER_ADDRESS="+entryBroker, "BROKER_CERT_FILE="+operator.CertFile, "BROKER_CERT_KEY_FILE="+operator.KeyFile,
		"BROKER_TRUSTED_CA_FILE="+ca.CertFile, "BROKER_AUTH_KEYS="+authKey, "BROKER_CACHE_SIZE=0",
		"ETCD_ADDRESS="+etcdURL, "ETCD_CERT_FILE="+operator.CertFile, "ETCD_CERT_KEY_FILE="+operator.KeyFile, "ETCD_TRUSTED_CA_FILE="+ca.CertFile,
		"CONSUMER_CERT_FILE="+operator.CertFile, "CONSUMER_CERT_KEY_FILE="+operator.KeyFile, "CONSUMER_TRUSTED_CA_FILE="+ca.CertFile,
		"CONSUMER_AUTH_KEYS="+authKey,
	)
	var operate = func(timeout time.Duration, name string, args ...string) (string, error) {
		var opCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
		var cmd = exec.CommandContext(opCtx, name, args...)
		cmd.Env, cmd.Dir = opEnv, dir
		var out, err = cmd.CombinedOutput()
		return string(out), err
	}
	var mustOperate = func(timeout time.Duration, name string, args ...string) string {
		t.Helper()
		var out, err = operate(timeout, name, args...)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return out
	}

	// The example's journals, replicated twice.
	journals, err := os.ReadFile(filepath.Join(repo, "example/specs/journals.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var replicated = strings.Replace(string(journals), "\nreplication: 1\n", "\nreplication: 2\n", 1)
	if replicated == string(journals) {
		t.Fatal("example/specs/journals.yaml no longer sets replication: 1 at its root")
	}
	var journalsFile = filepath.Join(dir, "journals.yaml")
	if err = os.WriteFile(journalsFile, []byte(replicated), 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; {
		var out, err = operate(30*time.Second, gazctl, "journals", "apply", "--specs", journalsFile)
		if err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("gazctl journals apply: %v\n%s", err, out)
		}
		time.Sleep(500 * time.Millisecond) // The brokers may still be joining.
	}

	// A ledger and a leaderboard member on each member host.
	type member struct {
		app  string
		ns   string
		port string
		p    *proc
	}
	var members []*member
	var startMember = func(m *member) {
		var ns = m.ns
		var args = append([]string{
			"--broker.address", entryBroker, "--broker.cert-file", certs[ns].CertFile, "--broker.cert-key-file", certs[ns].KeyFile,
			"--broker.trusted-ca-file", ca.CertFile, "--broker.auth-keys", authKey,
			"--consumer.host", hosts[ns], "--consumer.port", m.port, "--consumer.id", m.app + "-" + ns,
			"--consumer.server-cert-file", certs[ns].CertFile, "--consumer.server-cert-key-file", certs[ns].KeyFile, "--consumer.server-ca-file", ca.CertFile,
			"--consumer.peer-cert-file", certs[ns].CertFile, "--consumer.peer-cert-key-file", certs[ns].KeyFile, "--consumer.peer-ca-file", ca.CertFile,
			"--consumer.auth-keys", authKey, "--consumer.state-dir", filepath.Join(dir, "state", m.app+"-"+ns),
			"--consumer.handoff", "10s", "--etcd.lease", "5s", "--log.level", "warn",
		}, etcdClientFlags(ns)...)
		if m.app == "ledger" {
			// Longer than a host's outage, so that no payment finds its
			// order's hold released; bankctl check waits it out.
			args = append(args, "--hold-window", "30s")
		}
		if m.p == nil {
			m.p = newProc(m.app+" on "+ns, ns, m.app, args...)
		} else {
			m.p.start()
		}
	}
	for _, ns := range memberHosts {
		for _, app := range []string{"ledger", "leaderboard"} {
			var port = "9001"
			if app == "leaderboard" {
				port = "9002"
			}
			var m = &member{app: app, ns: ns, port: port}
			startMember(m)
			members = append(members, m)
		}
	}
	for _, m := range members {
		waitTCP(ctx, t, hosts[m.ns]+":"+m.port, m.p)
	}
	var address = func(app, ns string) string {
		var port = "9001"
		if app == "leaderboard" {
			port = "9002"
		}
		return "https://" + hosts[ns] + ":" + port
	}

	// Shards, with a hot standby each, through a member's Shard API.
	for _, app := range []string{"ledger", "leaderboard"} {
		var specs, err = os.ReadFile(filepath.Join(repo, "example/specs", app+"-shards.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		// The generated specs leave hot_standbys zero (the consumer's
		// shard_defaults have none), so that it is not among their keys.
		var standby = strings.Replace(string(specs), "\ncommon:\n", "\ncommon:\n  hot_standbys: 1\n", 1)
		if standby == string(specs) || strings.Contains(string(specs), "hot_standbys:") {
			t.Fatalf("example/specs/%s-shards.yaml has no common section without hot_standbys", app)
		}
		var file = filepath.Join(dir, app+"-shards.yaml")
		if err = os.WriteFile(file, []byte(standby), 0o644); err != nil {
			t.Fatal(err)
		}
		mustOperate(time.Minute, gazctl, "shards", "apply", "--specs", file, "--consumer.address", address(app, memberHosts[0]))
	}
	var list = mustOperate(time.Minute, gazctl, "shards", "list", "--consumer.address", address("ledger", memberHosts[1]))
	t.Logf("gazctl shards list, against a secured member:\n%s", list)

	// The load: paced, so that it runs through the faults.
	var bankctl = filepath.Join(bin, "bankctl")
	var record = filepath.Join(dir, "record.json")
	var published = make(chan error, 1)
	var pubOut bytes.Buffer
	go func() {
		var cmd = exec.CommandContext(ctx, bankctl, "publish", "--orders", "6000", "--payments", "6000", "--customers", "200",
			"--txn", "100", "--rate", "300", "--seed", "7", "--record", record)
		cmd.Env, cmd.Dir = opEnv, dir
		cmd.Stdout, cmd.Stderr = &pubOut, &pubOut
		published <- cmd.Run()
	}()
	var sleep = func(d time.Duration) {
		select {
		case err := <-published:
			t.Fatalf("bankctl publish ended before the faults did (%v):\n%s", err, pubOut.String())
		case <-time.After(d):
		}
	}

	// A broker host goes down: journals it replicated move to the others,
	// and stay appendable.
	sleep(5 * time.Second)
	t.Logf("taking %s down", brokerHosts[2])
	netw.setLink(brokerHosts[2], false)

	// The first member host is cut off for longer than the lease: its
	// members lose their leases and exit with code 3; their shards move to
	// the other host's members.
	sleep(5 * time.Second)
	t.Logf("cutting %s off", memberHosts[0])
	netw.setLink(memberHosts[0], false)
	for _, m := range members {
		if m.ns != memberHosts[0] {
			continue
		}
		if code := m.p.wait(time.Minute); code != 3 {
			t.Fatalf("%s, cut off past its lease, exited with %d, not 3 (lost lease):\n%s", m.p.name, code, m.p.output())
		}
		if !strings.Contains(m.p.output(), "lost the member's etcd lease") {
			t.Errorf("%s's exit does not say it lost its lease:\n%s", m.p.name, m.p.output())
		}
	}
	sleep(2 * time.Second)
	t.Logf("restoring %s, and restarting its members", memberHosts[0])
	netw.setLink(memberHosts[0], true)
	for _, m := range members {
		if m.ns == memberHosts[0] {
			startMember(m)
		}
	}
	for _, m := range members {
		if m.ns == memberHosts[0] {
			waitTCP(ctx, t, hosts[m.ns]+":"+m.port, m.p)
			mustOperate(time.Minute, gazctl, "shards", "list", "--consumer.address", address(m.app, m.ns))
		}
	}

	// The other member host's members crash.
	sleep(5 * time.Second)
	for _, m := range members {
		if m.ns == memberHosts[1] {
			t.Logf("killing %s", m.p.name)
			m.p.signal(syscall.SIGKILL)
			m.p.wait(time.Minute)
			startMember(m)
		}
	}

	// The families grow from 2 partitions to 4 while the load goes on:
	// gazconsumer rescale splits the shards online, over mutual TLS.
	var protos = filepath.Join(dir, "proto")
	if err = os.CopyFS(protos, os.DirFS(filepath.Join(repo, "example/proto"))); err != nil {
		t.Fatal(err)
	}
	var bankProto = filepath.Join(protos, "gazconsumer/example/bank/v1/bank.proto")
	b, err := os.ReadFile(bankProto)
	if err != nil {
		t.Fatal(err)
	}
	if err = os.WriteFile(bankProto, []byte(strings.ReplaceAll(string(b), "partitions: 2", "partitions: 4")), 0o644); err != nil {
		t.Fatal(err)
	}
	var rescaled = mustOperate(5*time.Minute, filepath.Join(bin, "gazconsumer"), "rescale",
		"--consumer", "Ledger", "--consumer", "Leaderboard", "--settle", "2s", protos)
	t.Logf("gazconsumer rescale:\n%s", lastLines(rescaled, 2))

	if err = <-published; err != nil {
		t.Fatalf("bankctl publish: %v\n%s", err, pubOut.String())
	}
	t.Logf("bankctl publish:\n%s", lastLines(pubOut.String(), 3))
	netw.setLink(brokerHosts[2], true)

	var follow = mustOperate(5*time.Minute, bankctl, "follow", "--timeout", "4m",
		"--ledger.address", address("ledger", memberHosts[0]), "--leaderboard.address", address("leaderboard", memberHosts[0]))
	t.Logf("bankctl follow:\n%s", lastLines(follow, 3))
	var check, checkErr = operate(5*time.Minute, bankctl, "check", "--record", record, "--wait", "2m",
		"--ledger.address", address("ledger", memberHosts[1]), "--leaderboard.address", address("leaderboard", memberHosts[1]))
	if checkErr != nil || !strings.Contains(check, "OK:") {
		t.Fatalf("bankctl check: %v\n%s", checkErr, check)
	}
	t.Logf("bankctl check:\n%s", lastLines(check, 1))
}

func lastLines(s string, n int) string {
	var lines = strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
