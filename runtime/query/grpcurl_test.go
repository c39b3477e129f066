package query_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// grpcurl is the grpcurl command, built from the module proxy by go run.
const grpcurl = "github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3"

// grpcurl lists a member's queries service by server reflection, and calls
// it with a request of JSON, knowing nothing of it but what reflection
// serves.
func TestGrpcurlListsAndCalls(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var f = newFixture(t, ctx, 2, nil)
	var addr = f.members[1].Svc.Endpoint().GRPCAddr()
	var run = func(args ...string) string {
		t.Helper()
		var out, err = exec.CommandContext(ctx, "go", append([]string{"run", grpcurl, "-plaintext"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	if out := run(addr, "list"); !strings.Contains(out, testQueries.Name) || !strings.Contains(out, "consumer.Shard") {
		t.Fatalf("grpcurl list:\n%s", out)
	}
	f.deposit("ann", 42, false)
	f.caughtUp()
	// Through either member: member 1 answers or proxies to ann's primary.
	if out := run("-d", `{"account": "ann"}`, addr, testQueries.Name+"/GetTotal"); !strings.Contains(out, `"cents": "42"`) {
		t.Fatalf("grpcurl GetTotal:\n%s", out)
	}
	var out, err = exec.CommandContext(ctx, "go", "run", grpcurl, "-plaintext", "-d", `{"account": "nobody"}`, addr, testQueries.Name+"/GetTotal").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "NotFound") || !strings.Contains(string(out), "in shard q-0") {
		t.Fatalf("grpcurl GetTotal of an account without deposits: %v\n%s", err, out)
	}
}
