package example_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc"
	channelzpb "google.golang.org/grpc/channelz/grpc_channelz_v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// The ledger command serves a service of its own, gRPC's channelz, on the
// member's port: with --consumer.auth-keys, a call needs a READ token
// signed by them.
func TestLedgerServesItsOwnService(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var bin = t.TempDir()
	buildCommands(t, bin, "ledger")
	var stack = devstacktest.StartT(t, "")

	var raw = make([]byte, 32)
	_, _ = rand.Read(raw)
	var key = base64.StdEncoding.EncodeToString(raw)
	var ledger = &member{t: t, bin: bin, app: "ledger", port: freePort(t), args: []string{
		"--etcd.address", stack.EtcdURL(), "--broker.address", string(stack.Brokers()[0].Endpoint()),
		"--consumer.auth-keys", key,
	}}
	ledger.start()
	t.Cleanup(func() {
		ledger.stop()
		if t.Failed() {
			t.Logf("ledger logged:\n%s", ledger.log)
		}
	})
	ledger.waitServing(ctx)

	var conn, err = grpc.NewClient("127.0.0.1:"+ledger.port, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var cz = channelzpb.NewChannelzClient(conn)

	_, err = cz.GetServers(ctx, &channelzpb.GetServersRequest{})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("channelz without a token: %v, want Unauthenticated", err)
	}
	keyed, err := auth.NewKeyedAuth(key)
	if err != nil {
		t.Fatal(err)
	}
	callCtx, err := keyed.Authorize(ctx, pb.Claims{Capability: pb.Capability_READ}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cz.GetServers(callCtx, &channelzpb.GetServersRequest{})
	if err != nil {
		t.Fatalf("channelz with a READ token: %v", err)
	} else if len(resp.Server) == 0 {
		t.Errorf("channelz knows no server of the member: %v", resp)
	}
}
