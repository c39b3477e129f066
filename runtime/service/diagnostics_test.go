package service_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// get returns the status and body of a GET of path on member m's port.
func get(t *testing.T, m *membertest.Member, path string) (int, string) {
	t.Helper()
	var c = http.Client{Timeout: 30 * time.Second}
	var resp, err = c.Get(m.Svc.Endpoint().URL().String() + path)
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(body)
}

// healthOf returns the gRPC health statuses of member m, by service.
func healthOf(t *testing.T, m *membertest.Member, services ...string) map[string]healthpb.HealthCheckResponse_ServingStatus {
	t.Helper()
	var conn, err = grpc.NewClient(m.Svc.Endpoint().GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	must(t, err)
	defer conn.Close()
	var out = make(map[string]healthpb.HealthCheckResponse_ServingStatus)
	for _, svc := range services {
		var ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		var resp, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		cancel()
		must(t, err)
		out[svc] = resp.Status
	}
	return out
}

// checkReady checks that m's /debug/ready answers want, with a body
// naming each of names, and that its gRPC health service agrees.
// The member answers from its view of etcd, which follows etcd's within a
// moment: checkReady gives it 10s to answer want.
func checkReady(t *testing.T, m *membertest.Member, want int, names ...string) {
	t.Helper()
	var code, body = get(t, m, "/debug/ready")
	for deadline := time.Now().Add(10 * time.Second); code != want && time.Now().Before(deadline); {
		time.Sleep(membertest.PollInterval)
		code, body = get(t, m, "/debug/ready")
	}
	if code != want {
		t.Errorf("/debug/ready of %s: %d %q, want %d", m.ID().Suffix, code, body, want)
	}
	for _, n := range names {
		if !strings.Contains(body, n) {
			t.Errorf("/debug/ready of %s: %q does not name %q", m.ID().Suffix, body, n)
		}
	}
	var wantHealth = healthpb.HealthCheckResponse_SERVING
	if want != http.StatusOK {
		wantHealth = healthpb.HealthCheckResponse_NOT_SERVING
	}
	for svc, got := range healthOf(t, m, "", "consumer.Shard") {
		if got != wantHealth {
			t.Errorf("gRPC health of %s's service %q: %v, want %v", m.ID().Suffix, svc, got, wantHealth)
		}
	}
}

// A member serves /debug/ready, answering 503 with the reason until it has
// joined its group and while a shard of its is FAILED (unless
// ReadyIgnoresFailed), and the gRPC health service agrees; it serves pprof,
// expvar and its metrics at /debug/metrics too.
func TestDiagnostics(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var c = newCluster(t, 1)
	var etcd = c.Stack.Etcd()

	// A former lease of member-a's key holds it back from joining.
	var lease, err = etcd.Grant(ctx, 60)
	must(t, err)
	var ks = groupkeys.NewKeySpace(c.Prefix)
	_, err = etcd.Put(ctx, allocator.MemberKey(ks, "local", "member-a"), (&pc.ConsumerSpec{
		ProcessSpec: pb.ProcessSpec{Id: pb.ProcessSpec_ID{Zone: "local", Suffix: "member-a"}, Endpoint: "http://127.0.0.1:1"},
		ShardLimit:  1,
	}).MarshalString(), clientv3.WithLease(lease.ID))
	must(t, err)
	var a = start(t, c, "member-a")
	checkReady(t, a, http.StatusServiceUnavailable, "member-a has not joined its group yet")
	var listCtx, cancelList = context.WithTimeout(ctx, 300*time.Millisecond)
	if _, err := shardClient(t, c, a).List(listCtx, &pc.ListRequest{}); status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("List of a member not joined: %v, want it to wait for the member, and time out", err)
	}
	cancelList()

	// Once it has joined, it is ready.
	_, err = etcd.Revoke(ctx, lease.ID)
	must(t, err)
	var deadline = time.Now().Add(30 * time.Second)
	for a.Svc.Ready() != nil && time.Now().Before(deadline) {
		time.Sleep(membertest.PollInterval)
	}
	checkReady(t, a, http.StatusOK)

	// Its diagnostics.
	for path, want := range map[string]string{
		"/debug/pprof/":                  "goroutine",
		"/debug/pprof/cmdline":           "",
		"/debug/pprof/symbol":            "num_symbols",
		"/debug/pprof/goroutine?debug=1": "goroutine profile",
		"/debug/vars":                    `"memstats"`,
		"/debug/metrics":                 "go_goroutines",
		"/metrics":                       "go_goroutines",
	} {
		if code, body := get(t, a, path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("GET %s: %d, %.200q, want 200 with %q", path, code, body, want)
		}
	}

	// A FAILED shard makes it unready, naming the shard.
	must(t, c.ApplyShards(ctx, a, func(s *pc.ShardSpec) { s.HotStandbys = 0 }))
	_, err = c.WaitStatus(ctx, "shard-0", a.ID(), pc.ReplicaStatus_PRIMARY)
	must(t, err)
	checkReady(t, a, http.StatusOK)
	_, err = client.Append(ctx, c.Stack.Journals(), pb.AppendRequest{Journal: c.Input(0)}, strings.NewReader("{this is not json}\n"))
	must(t, err)
	_, err = c.WaitStatus(ctx, "shard-0", a.ID(), pc.ReplicaStatus_FAILED)
	must(t, err)
	checkReady(t, a, http.StatusServiceUnavailable, "shard shard-0 is FAILED", "undecodable message")

	// Unless it is told to ignore failed shards: the shard fails on member-b
	// too, which stays ready.
	c.ReadyIgnoresFailed = true
	var b = start(t, c, "member-b")
	must(t, a.Kill())
	_, err = c.WaitStatus(ctx, "shard-0", b.ID(), pc.ReplicaStatus_FAILED)
	must(t, err)
	checkReady(t, b, http.StatusOK)

	// A member that stopped is not.
	must(t, b.Stop())
	if err := b.Svc.Ready(); err == nil || !strings.Contains(err.Error(), "member-b is exiting") {
		t.Errorf("Ready of a stopped member: %v", err)
	}
}
