package query_test

import (
	"context"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devcerts"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"go.gazette.dev/core/server"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Members serving over mutual TLS answer queries over it, proxying the
// calls of the other member's shards over their peer TLS; a client
// without a certificate the CA signed is refused.
func TestQueriesOverTLS(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var dir = t.TempDir()
	var ca, err = devcerts.NewCA(dir, "test")
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
	serverTLS, err := server.BuildTLSConfig(member.CertFile, member.KeyFile, ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	peerTLS, err := server.BuildTLSConfig(member.CertFile, member.KeyFile, ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	var f = newFixture(t, ctx, 2, func(c *membertest.Cluster) { c.ServerTLS, c.PeerTLS = serverTLS, peerTLS })
	var accounts = []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for _, a := range accounts {
		f.deposit(a, 7, false)
	}
	f.caughtUp()
	var proxied int
	for _, a := range accounts {
		if f.primaryOf(a) != f.members[0] {
			proxied++
		}
	}
	if proxied == 0 || proxied == len(accounts) {
		t.Fatalf("%d of %d accounts' shards have their primary on member-b", proxied, len(accounts))
	}

	clientTLS, err := server.BuildTLSConfig(client.CertFile, client.KeyFile, ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := query.Dialer(clientTLS)(f.members[0].Svc.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var c = query.NewClient(conn, nil)
	for _, a := range accounts {
		if got, err := getTotal(ctx, c, a); err != nil || got.Cents != 7 {
			t.Fatalf("GetTotal(%s) over TLS: %v, %v", a, got, err)
		}
	}
	if totals, _, err := listTotals(ctx, c, 3); err != nil || len(totals) != len(accounts) {
		t.Fatalf("ListTotals over TLS: %v, %v", totals, err)
	}

	// Without a client certificate.
	anonTLS, err := server.BuildTLSConfig("", "", ca.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	anon, err := query.Dialer(anonTLS)(f.members[0].Svc.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	var shortCtx, stop = context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	if _, err = getTotal(shortCtx, query.NewClient(anon, nil), "a"); status.Code(err) != codes.Unavailable {
		t.Fatalf("without a client certificate: %v", err)
	}
}
