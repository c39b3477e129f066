package queriesv1_test

// This test is copied next to the generated queries/v1 package by
// TestBuildGoldens. It calls queries service AccountsQueries through its
// generated client over a connection that records the calls: the package
// registers the service for its consumer as it initializes, the client
// calls each rpc by its gRPC name, and malformed requests are refused
// before any call, naming the field.

import (
	"context"
	"strings"
	"testing"

	queriesv1 "example.test/golden/queries/v1"

	"github.com/gazconsumer/gazconsumer/runtime/query"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// recorder is a connection recording the calls made through it.
type recorder struct{ calls []string }

func (r *recorder) Invoke(_ context.Context, method string, req, _ any, _ ...grpc.CallOption) error {
	r.calls = append(r.calls, method+" "+string(req.(proto.Message).ProtoReflect().Descriptor().Name()))
	return nil
}

func (r *recorder) NewStream(context.Context, *grpc.StreamDesc, string, ...grpc.CallOption) (grpc.ClientStream, error) {
	panic("not a streaming service")
}

func TestQueriesClient(t *testing.T) {
	var services = query.ServicesOf("queries.v1.Accounts")
	if len(services) != 1 || services[0].Name != "queries.v1.AccountsQueries" || len(services[0].Methods) != 4 ||
		services[0].Partitions != "app.gazette.dev/message-type=queries.v1.Deposit" {
		t.Fatalf("registered services: %+v", services)
	}
	var ctx = context.Background()
	var rec = new(recorder)
	var c = queriesv1.NewAccountsQueriesClient(query.NewClient(rec, nil))
	if _, err := c.GetEntry(ctx, &queriesv1.GetEntryRequest{Account: "a", At: timestamppb.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTotal(ctx, &queriesv1.GetTotalRequest{Account: "a", Cents: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ListEntries(ctx, &queriesv1.ListEntriesRequest{Account: "a", Limit: 500}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Top(ctx, &queriesv1.TopRequest{From: &queriesv1.Total{Cents: 100}, To: &queriesv1.Total{Cents: 10}}); err != nil {
		t.Fatal(err)
	}
	var want = "/queries.v1.AccountsQueries/GetEntry GetEntryRequest,/queries.v1.AccountsQueries/GetTotal GetTotalRequest," +
		"/queries.v1.AccountsQueries/ListEntries ListEntriesRequest,/queries.v1.AccountsQueries/Top TopRequest"
	if got := strings.Join(rec.calls, ","); got != want {
		t.Fatalf("calls %s, want %s", got, want)
	}

	for _, tc := range []struct {
		call func() error
		want string
	}{
		{func() error { _, err := c.Top(ctx, &queriesv1.TopRequest{Count: 1 << 31}); return err }, ""},
		{func() error { _, err := c.ListEntries(ctx, &queriesv1.ListEntriesRequest{Limit: -1}); return err }, "field limit"},
		{func() error { _, err := c.ListEntries(ctx, &queriesv1.ListEntriesRequest{PageToken: "!"}); return err }, "field page_token"},
		{func() error { _, err := c.Top(ctx, &queriesv1.TopRequest{After: []byte("x")}); return err }, "field after"},
		{func() error {
			// A token of the range's first row: not within [from, to) of
			// a range of larger totals.
			_, err := c.Top(ctx, &queriesv1.TopRequest{From: &queriesv1.Total{Cents: 5}, After: []byte{0xff}})
			return err
		}, "field after"},
	} {
		var err = tc.call()
		if tc.want == "" {
			if err != nil {
				t.Errorf("a valid request: %v", err)
			}
			continue
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want InvalidArgument naming %q", err, tc.want)
		}
	}
	if n := len(rec.calls); n != 5 {
		t.Fatalf("%d calls made; malformed requests must make none", n)
	}
}
