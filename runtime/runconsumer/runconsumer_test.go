package runconsumer_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devcerts"
	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest/sums"
	"github.com/gazconsumer/gazconsumer/runtime/runconsumer"
	"github.com/gazconsumer/gazconsumer/runtime/service"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/server"
	"google.golang.org/grpc"
	channelzpb "google.golang.org/grpc/channelz/grpc_channelz_v1"
	channelzsvc "google.golang.org/grpc/channelz/service"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// testStack is the one stack of the test process.
var testStack *devstacktest.Stack

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) != "" {
		// Re-executed by runMain: the test binary is a consumer command.
		runconsumer.Main("testapp", func(runconsumer.Deps) (runtime.Application, error) {
			return sums.App{Output: "never/read"}, nil
		})
	}
	var code = func() int {
		var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		if testStack, err = devstacktest.Start(ctx, ""); err != nil {
			panic(err)
		}
		defer testStack.Close()
		return m.Run()
	}()
	os.Exit(code)
}

var clusters int

func newCluster(t *testing.T) *sums.Cluster {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clusters++
	var c, err = sums.New(ctx, testStack.Stack, fmt.Sprintf("rc%d", clusters), 1, t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// serve runs Serve with the command line args in the background, and
// returns a function that stops it and returns Serve's error.
func serve(t *testing.T, c *sums.Cluster, args ...string) (runconsumer.Flags, func() error) {
	t.Helper()
	var f runconsumer.Flags
	var fs = flag.NewFlagSet(c.Name, flag.ContinueOnError)
	f.Register(fs, c.Name)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	var ctx, stop = context.WithCancel(context.Background())
	var done = make(chan error, 1)
	go func() {
		done <- runconsumer.Serve(ctx, f, func(d runconsumer.Deps) (runtime.Application, error) {
			if d.Journals == nil || d.Partitions == nil || d.Server == nil {
				t.Error("Deps lack the journal client, partitions or server")
			}
			// An application's own service, on the member's port.
			channelzsvc.RegisterChannelzServiceToServer(d.Server)
			return sums.App{Output: c.Output()}, nil
		})
	}()
	var stopped bool
	var err error
	t.Cleanup(func() {
		if !stopped {
			stop()
			<-done
		}
	})
	return f, func() error {
		if !stopped {
			stopped = true
			stop()
			err = <-done
		}
		return err
	}
}

// waitPrimary applies shard 0 of c through etcd and waits for member id to
// be its primary.
func waitPrimary(t *testing.T, c *sums.Cluster, prefix, id string) {
	t.Helper()
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var spec = c.ShardSpec(0)
	spec.HotStandbys = 0
	var ks = groupkeys.NewKeySpace(prefix)
	if _, err := testStack.Etcd().Put(ctx, allocator.ItemKey(ks, spec.Id.String()), spec.MarshalString()); err != nil {
		t.Fatal(err)
	}
	if _, err := membertest.WaitStatus(ctx, testStack.Etcd(), prefix, spec.Id, pb.ProcessSpec_ID{Zone: "local", Suffix: id}, pc.ReplicaStatus_PRIMARY); err != nil {
		t.Fatalf("member %s never became primary: %v", id, err)
	}
}

func TestServeFromFlagsAndEnvironment(t *testing.T) {
	var c = newCluster(t)
	// The environment, as Gazette's own consumers read it; a flag overrides it.
	t.Setenv("ETCD_ADDRESS", "http://127.0.0.1:1,"+testStack.EtcdURL()) // Several endpoints, one down.
	t.Setenv("BROKER_ADDRESS", string(testStack.Brokers()[0].Endpoint()))
	t.Setenv("CONSUMER_ID", "from-env")
	t.Setenv("ETCD_LEASE_TTL", "4s")
	t.Setenv("LOG_LEVEL", "warn")
	var f, stop = serve(t, c, "--consumer.id=deployed-1", "--consumer.host=127.0.0.1", "--consumer.state-dir="+t.TempDir())
	if f.EtcdPrefix != c.Prefix || f.ID != "deployed-1" || f.EtcdLeaseTTL != 4*time.Second || f.LogLevel.String() != "WARN" || !f.DirectFragmentReads {
		t.Fatalf("flags = %+v", f)
	}
	waitPrimary(t, c, f.EtcdPrefix, "deployed-1")
	if err := stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}

	// Bad settings are refused before anything starts, naming the flag.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--broker.address=not a url"}, "--broker.address"},
		{[]string{"--consumer.server-cert-file=/nonexistent.pem", "--consumer.server-cert-key-file=/nonexistent-key.pem"}, "--consumer.server-cert-file"},
		{[]string{"--broker.cert-file=/some.pem"}, "--broker.cert-file and --broker.cert-key-file go together"},
		{[]string{"--consumer.auth-keys=!!!"}, "--consumer.auth-keys"},
		{[]string{"--consumer.server-ca-file=/ca.pem"}, "need --consumer.server-cert-file"},
	} {
		var _, stop = serve(t, c, append([]string{"--consumer.host=127.0.0.1"}, tc.args...)...)
		if err := stop(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Serve %v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("boom"), runconsumer.ExitFailure},
		{fmt.Errorf("service: member m: %w", service.ErrLeaseLost), runconsumer.ExitLeaseLost},
		{fmt.Errorf("service: member m: %w (timeout 1s)", service.ErrHandoffTimedOut), runconsumer.ExitHandoffTimedOut},
	} {
		if got := runconsumer.ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func newKey(t *testing.T) string {
	var b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// A member serving mutual TLS with authorization refuses clients without a
// certificate its CA signed, calls without a token, with a token of another
// key, or with one that doesn't cover the call, each with a clear status;
// the right client, and gazctl, are served.
func TestSecuredMember(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var c = newCluster(t)
	var dir = t.TempDir()
	var ca, err = devcerts.NewCA(dir, "dev")
	if err != nil {
		t.Fatal(err)
	}
	member, err := ca.Issue(dir, "member", "127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(dir, "client", "client.local")
	if err != nil {
		t.Fatal(err)
	}
	rogueCA, err := devcerts.NewCA(dir, "rogue")
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := rogueCA.Issue(dir, "rogue-client", "client.local")
	if err != nil {
		t.Fatal(err)
	}
	var key, otherKey = newKey(t), newKey(t)

	var f, _ = serve(t, c,
		"--etcd.address="+testStack.EtcdURL(), "--broker.address="+string(testStack.Brokers()[0].Endpoint()),
		"--broker.auth-keys="+key,
		"--consumer.id=secured", "--consumer.host=127.0.0.1", "--consumer.state-dir="+t.TempDir(),
		"--consumer.server-cert-file="+member.CertFile, "--consumer.server-cert-key-file="+member.KeyFile,
		"--consumer.server-ca-file="+ca.CertFile,
		"--consumer.peer-cert-file="+member.CertFile, "--consumer.peer-cert-key-file="+member.KeyFile,
		"--consumer.peer-ca-file="+ca.CertFile,
		"--consumer.auth-keys="+key)
	waitPrimary(t, c, f.EtcdPrefix, "secured")
	var addr = memberAddress(t, f.EtcdPrefix, "secured")

	var dial = func(creds credentials.TransportCredentials) pc.ShardClient {
		var conn, err = grpc.NewClient(addr.GRPCAddr(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		return pc.NewShardClient(conn)
	}
	var tlsCreds = func(p devcerts.Pair) credentials.TransportCredentials {
		var cfg, err = server.BuildTLSConfig(p.CertFile, p.KeyFile, ca.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		return credentials.NewTLS(cfg)
	}
	var signed = func(k string, claims pb.Claims) context.Context {
		var a, err = auth.NewKeyedAuth(k)
		if err != nil {
			t.Fatal(err)
		}
		callCtx, err := a.Authorize(ctx, claims, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return callCtx
	}
	var list = pb.Claims{Capability: pb.Capability_LIST}
	var apply = &pc.ApplyRequest{Changes: []pc.ApplyRequest_Change{{Upsert: c.ShardSpec(0), ExpectModRevision: -1}}}

	for _, tc := range []struct {
		name string
		call func() error
		code codes.Code
		want string
	}{
		{"plaintext", func() error {
			_, err := dial(insecure.NewCredentials()).List(signed(key, list), &pc.ListRequest{})
			return err
		}, codes.Unavailable, ""},
		{"no client certificate", func() error {
			_, err := dial(credentials.NewTLS(&tls.Config{RootCAs: mustPool(t, ca.CertFile)})).List(signed(key, list), &pc.ListRequest{})
			return err
		}, codes.Unavailable, ""},
		{"a certificate of another CA", func() error {
			_, err := dial(tlsCreds(rogue)).List(signed(key, list), &pc.ListRequest{})
			return err
		}, codes.Unavailable, ""},
		{"no token", func() error {
			_, err := dial(tlsCreds(client)).List(ctx, &pc.ListRequest{})
			return err
		}, codes.Unauthenticated, "missing"},
		{"a token of another key", func() error {
			_, err := dial(tlsCreds(client)).List(signed(otherKey, list), &pc.ListRequest{})
			return err
		}, codes.Unauthenticated, "signature is invalid"},
		{"a LIST token to apply", func() error {
			_, err := dial(tlsCreds(client)).Apply(signed(key, list), apply)
			return err
		}, codes.Unauthenticated, "APPLY"},
		{"an APPLY token for other shards", func() error {
			_, err := dial(tlsCreds(client)).Apply(signed(key, pb.Claims{Capability: pb.Capability_APPLY, Selector: pb.MustLabelSelector("id=other")}), apply)
			return err
		}, codes.PermissionDenied, "not authorized to apply shard shard-0"},
	} {
		var err = tc.call()
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %s naming %q", tc.name, err, tc.code, tc.want)
		}
	}

	// The right certificate and key are served.
	var sc = pc.NewAuthShardClient(dial(tlsCreds(client)), mustKeyed(t, key))
	resp, err := sc.List(ctx, &pc.ListRequest{})
	if err != nil || len(resp.Shards) != 1 {
		t.Fatalf("List: %v %v", resp, err)
	}

	// The application's own service (channelz, registered through
	// Deps.Server) is served under the same TLS and keys: READ by default.
	var channelz = func(creds credentials.TransportCredentials, callCtx context.Context) error {
		var conn, err = grpc.NewClient(addr.GRPCAddr(), grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = channelzpb.NewChannelzClient(conn).GetTopChannels(callCtx, &channelzpb.GetTopChannelsRequest{})
		return err
	}
	for _, tc := range []struct {
		name string
		err  error
		code codes.Code
	}{
		{"plaintext", channelz(insecure.NewCredentials(), signed(key, pb.Claims{Capability: pb.Capability_READ})), codes.Unavailable},
		{"a certificate of another CA", channelz(tlsCreds(rogue), signed(key, pb.Claims{Capability: pb.Capability_READ})), codes.Unavailable},
		{"no token", channelz(tlsCreds(client), ctx), codes.Unauthenticated},
		{"a token of another key", channelz(tlsCreds(client), signed(otherKey, pb.Claims{Capability: pb.Capability_READ})), codes.Unauthenticated},
		{"a LIST token", channelz(tlsCreds(client), signed(key, list)), codes.Unauthenticated},
		{"a READ token", channelz(tlsCreds(client), signed(key, pb.Claims{Capability: pb.Capability_READ})), codes.OK},
	} {
		if status.Code(tc.err) != tc.code {
			t.Errorf("the application's service, %s: %v, want %s", tc.name, tc.err, tc.code)
		}
	}

	// And gazctl, as an operator runs it.
	gazctl, err := filepath.Abs("../../.tools/bin/gazctl")
	if err != nil {
		t.Fatal(err)
	} else if _, err = os.Stat(gazctl); err != nil {
		t.Fatalf("gazctl is not installed (run scripts/setup.sh): %v", err)
	}
	var cmd = exec.CommandContext(ctx, gazctl, "shards", "list", "--consumer.address", string(addr),
		"--consumer.cert-file", client.CertFile, "--consumer.cert-key-file", client.KeyFile,
		"--consumer.trusted-ca-file", ca.CertFile, "--consumer.auth-keys", key)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "shard-0") || !strings.Contains(string(out), "PRIMARY") {
		t.Fatalf("gazctl shards list: %v\n%s", err, out)
	}

	// Its probes present its peer certificate, and check its own against
	// the host it advertises.
	f.Port = addr.URL().Port()
	for _, kind := range []string{"ready", "live"} {
		if answer, err := runconsumer.Probe(ctx, f, kind); err != nil || answer != "200 ready" {
			t.Errorf("probe %s: %q, %v", kind, answer, err)
		}
	}
	var noCert = f
	noCert.PeerCertFile, noCert.PeerCertKeyFile = "", ""
	if _, err := runconsumer.Probe(ctx, noCert, "live"); err == nil {
		t.Errorf("a probe without the peer certificate succeeded")
	}
}

// memberAddress returns the endpoint member id advertises in etcd.
func memberAddress(t *testing.T, prefix, id string) pb.Endpoint {
	t.Helper()
	var ks = groupkeys.NewKeySpace(prefix)
	var resp, err = testStack.Etcd().Get(context.Background(), allocator.MemberKey(ks, "local", id))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("member %s: %v %v", id, resp, err)
	}
	var spec pc.ConsumerSpec
	if err = spec.Unmarshal(resp.Kvs[0].Value); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(spec.Endpoint), "https://") {
		t.Fatalf("a member serving TLS advertises %s", spec.Endpoint)
	}
	return spec.Endpoint
}

func mustKeyed(t *testing.T, key string) pb.Authorizer {
	var a, err = auth.NewKeyedAuth(key)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustPool(t *testing.T, caFile string) *x509.CertPool {
	var cfg, err = server.BuildTLSConfig("", "", caFile)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.RootCAs
}

// freePort returns a port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	var l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// `<command> probe ready` succeeds once the member has joined its group;
// `probe live` as soon as it answers at all, and fails where no member
// answers.
func TestProbe(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c = newCluster(t)
	var port = freePort(t)
	var prefix = "/gazette/consumers/" + c.Name

	// A former lease of the member's key holds it back from joining.
	var etcd = testStack.Etcd()
	var lease, err = etcd.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = etcd.Put(ctx, allocator.MemberKey(groupkeys.NewKeySpace(prefix), "local", "probed"), "former",
		clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	var f, _ = serve(t, c, "--etcd.address="+testStack.EtcdURL(), "--broker.address="+string(testStack.Brokers()[0].Endpoint()),
		"--consumer.id=probed", "--consumer.host=127.0.0.1", "--consumer.port="+port, "--consumer.state-dir="+t.TempDir())

	var probe = func(kind string) (string, error) {
		t.Helper()
		for {
			var answer, err = runconsumer.Probe(ctx, f, kind)
			if err == nil || !strings.Contains(err.Error(), "connection refused") || ctx.Err() != nil {
				return answer, err // Unless the member has not bound its port yet.
			}
			time.Sleep(membertest.PollInterval)
		}
	}
	if answer, err := probe("ready"); err == nil || !strings.HasPrefix(answer, "503 ") || !strings.Contains(answer, "member probed has not joined its group yet") {
		t.Errorf("probe ready of a member not joined: %q, %v", answer, err)
	}
	if answer, err := probe("live"); err != nil || !strings.HasPrefix(answer, "503") {
		t.Errorf("probe live of a member not joined: %q, %v", answer, err)
	}

	if _, err = etcd.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	for {
		if answer, err := probe("ready"); err == nil {
			if answer != "200 ready" {
				t.Errorf("probe ready: %q", answer)
			}
			break
		} else if ctx.Err() != nil {
			t.Fatalf("the member never became ready: %v", err)
		}
		time.Sleep(membertest.PollInterval)
	}

	// As a command, the way a Kubernetes exec probe runs it.
	var cmd, out = mainCmd(t, []string{"CONSUMER_PORT=" + port}, "probe", "ready")
	if code := exitCode(t, cmd); code != 0 || !strings.Contains(out.String(), "200 ready") {
		t.Errorf("probe ready: exit code %d, it printed %q", code, out)
	}
	cmd, out = mainCmd(t, nil, "probe", "live", "--consumer.port="+freePort(t))
	if code := exitCode(t, cmd); code != runconsumer.ExitFailure || !strings.Contains(out.String(), "connection refused") {
		t.Errorf("probe live of a port nobody serves: exit code %d, it printed %q", code, out)
	}
	cmd, out = mainCmd(t, nil, "probe", "sideways", "--consumer.port="+port)
	if code := exitCode(t, cmd); code != runconsumer.ExitFailure || !strings.Contains(out.String(), "want ready or live") {
		t.Errorf("probe sideways: exit code %d, it printed %q", code, out)
	}
}
