package query_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"github.com/gazconsumer/gazconsumer/runtime/query/internal/testpb"
	"github.com/gazconsumer/gazconsumer/specs"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

func TestMain(m *testing.M) {
	slog.SetLogLoggerLevel(devstacktest.LogLevel())
	query.Register(testQueries)
	var code = m.Run()
	os.Exit(devstacktest.LeakChecked(code))
}

// fixture is the test consumer's cluster on a stack: two members running
// its shards, and deposits published to its partitions.
type fixture struct {
	t       *testing.T
	ctx     context.Context
	stack   *devstacktest.Stack
	c       *membertest.Cluster
	bank    *bank
	prefix  string
	shards  int
	members []*membertest.Member
	pub     *message.Publisher
	mapping message.MappingFunc
	want    map[string]*testpb.Total // Of the deposits published.
	entries map[string][]string      // Entry ids of each account, published.
	serial  int
}

// newFixture starts a stack, the journals of n shards and two members
// running them, configured by edit (if not nil) before they start.
func newFixture(t *testing.T, ctx context.Context, n int, edit func(*membertest.Cluster)) *fixture {
	var f = startFixture(t, ctx, n, edit, rocks.Opener{})
	if err := f.c.Apply(ctx, f.members[0], shardSpecs(f.prefix, n)...); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := f.c.PrimaryOf(ctx, shardID(i)); err != nil {
			t.Fatal(err)
		}
	}
	f.spread()
	// Each member routes queries by its own view of etcd: it must hold the
	// specs applied through the other.
	if err := f.c.WaitSeen(ctx); err != nil {
		t.Fatal(err)
	}
	return f
}

// startFixture is newFixture but for the shards, whose stores stores
// opens: their journals exist, their specs do not.
func startFixture(t *testing.T, ctx context.Context, n int, edit func(*membertest.Cluster), stores runtime.StoreOpener) *fixture {
	var f = &fixture{t: t, ctx: ctx, bank: newBank(), prefix: "qt", shards: n,
		want: map[string]*testpb.Total{}, entries: map[string][]string{}}
	f.stack = devstacktest.StartT(t, "")
	if _, err := specs.ApplyJournals(ctx, f.stack.Journals(), "test journals", []byte(journalsYAML(f.prefix, n))); err != nil {
		t.Fatal(err)
	}
	var watchCtx, stopWatching = context.WithCancel(context.Background())
	t.Cleanup(stopWatching) // Before the stack closes: brokers drain open watches.
	var partitions = partition.NewWatched(watchCtx, f.stack.Journals())
	var app, err = newTestApp(f.bank, partitions, stores)
	if err != nil {
		t.Fatal(err)
	}
	f.c = membertest.New(f.stack.Stack, "/gazette/consumers/"+f.prefix, app, t.TempDir())
	f.c.LeaseTTL = 2 * time.Second
	if edit != nil {
		edit(f.c)
	}
	t.Cleanup(f.c.Close)
	for _, id := range []string{"member-a", "member-b"} {
		var m, err = f.c.Start(id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Kill() })
		f.members = append(f.members, m)
	}
	var sel = pb.MustLabelSelector(labels.MessageType + "=" + depositType)
	f.mapping = partition.Mapping(partition.KeyOf, partitions.Partitions(sel))
	f.pub = message.NewPublisher(client.NewAppendService(watchCtx, f.stack.Journals()), nil)
	return f
}

func shardID(i int) pc.ShardID { return pc.ShardID(fmt.Sprintf("q-%02d", i)) }

// spread makes each member the primary of some shards: of the odd shards
// whose primary is the primary of the first, the primary is unassigned, so
// that its standby on the other member takes over.
func (f *fixture) spread() {
	f.t.Helper()
	var first, err = f.c.PrimaryOf(f.ctx, shardID(0))
	if err != nil {
		f.t.Fatal(err)
	}
	sc, err := f.c.ShardClient(first.Svc.Endpoint())
	if err != nil {
		f.t.Fatal(err)
	}
	for i := 1; i < f.shards; i += 2 {
		var id = shardID(i)
		if _, err = f.c.WaitStatus(f.ctx, id, otherThan(f.members, first).ID(), pc.ReplicaStatus_STANDBY); err != nil {
			f.t.Fatal(err)
		}
		if p, err := f.c.PrimaryOf(f.ctx, id); err != nil {
			f.t.Fatal(err)
		} else if p != first {
			continue
		}
		if _, err = sc.Unassign(f.ctx, &pc.UnassignRequest{Shards: []pc.ShardID{id}}); err != nil {
			f.t.Fatal(err)
		}
		for {
			var p, err = f.c.PrimaryOf(f.ctx, id)
			if err != nil {
				f.t.Fatal(err)
			} else if p != first {
				break
			}
			time.Sleep(membertest.PollInterval)
		}
	}
}

// otherThan returns the member of members that is not m.
func otherThan(members []*membertest.Member, m *membertest.Member) *membertest.Member {
	for _, o := range members {
		if o != m {
			return o
		}
	}
	return nil
}

// deposit publishes a deposit of cents into account, committed, and
// returns its entry id.
func (f *fixture) deposit(account string, cents int64, hold bool) string {
	f.t.Helper()
	f.serial++
	var entry = fmt.Sprintf("e%05d", f.serial)
	var aa, err = f.pub.PublishCommitted(f.mapping, &testpb.Deposit{Account: account, Entry: entry, Cents: cents, Hold: hold})
	if err != nil {
		f.t.Fatal(err)
	}
	if err = aa.Err(); err != nil {
		f.t.Fatal(err)
	}
	var w = f.want[account]
	if w == nil {
		w = &testpb.Total{Account: account}
		f.want[account] = w
	}
	w.Cents += cents
	w.Deposits++
	f.entries[account] = append(f.entries[account], entry)
	return entry
}

// caughtUp waits until every shard has committed its reads through its
// partition's write head.
func (f *fixture) caughtUp() {
	f.t.Helper()
	for i := range f.shards {
		var journal = pb.Journal(fmt.Sprintf("%s/deposits/part-%02d", f.prefix, i))
		var head, err = membertest.WriteHead(f.ctx, f.stack.Journals(), journal)
		if err != nil {
			f.t.Fatal(err)
		}
		if err = f.c.WaitReadThrough(f.ctx, shardID(i), pb.Offsets{journal: head}); err != nil {
			f.t.Fatal(err)
		}
	}
}

// through returns a client calling member m, which routes each call.
func (f *fixture) through(m *membertest.Member) *query.Client {
	f.t.Helper()
	var conn, err = grpc.NewClient(m.Svc.Endpoint().GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = conn.Close() })
	return query.NewClient(conn, f.c.Authorizer)
}

// routedByEtcd returns a client routing each call itself, by a KeySpace it
// loads from etcd and watches (as a client outside the members does), until
// the test ends.
func (f *fixture) routedByEtcd() *query.Client {
	f.t.Helper()
	var watchCtx, stopWatch = context.WithCancel(f.ctx)
	var ks, err = groupkeys.Watch(watchCtx, f.stack.Etcd(), f.c.Prefix)
	if err != nil {
		stopWatch()
		f.t.Fatal(err)
	}
	var c = query.NewRoutedClient(query.NewRouter(ks, partition.NewWatched(watchCtx, f.stack.Journals())), query.Dialer(nil), nil)
	f.t.Cleanup(func() { _ = c.Close(); stopWatch() })
	return c
}

// routed returns a client routing each call itself, by member a's
// KeySpace.
func (f *fixture) routed() *query.Client {
	var partitions = partition.NewWatched(f.ctx, f.stack.Journals())
	var c = query.NewRoutedClient(query.NewRouter(f.members[0].Svc.KeySpace(), partitions), query.Dialer(nil), f.c.Authorizer)
	f.t.Cleanup(func() { _ = c.Close() })
	return c
}

func getTotal(ctx context.Context, c *query.Client, account string) (*testpb.Total, error) {
	var resp = new(testpb.Total)
	return resp, c.Invoke(ctx, testQueries, "GetTotal", &testpb.GetTotalRequest{Account: account}, resp)
}

// listAll pages through a scan of limit rows a page, and returns its rows.
func listEntries(ctx context.Context, c *query.Client, account string, limit int32) ([]string, int, error) {
	var out []string
	var pages int
	var req = &testpb.ListEntriesRequest{Account: account, Limit: limit}
	for {
		var resp = new(testpb.ListEntriesResponse)
		if err := c.Invoke(ctx, testQueries, "ListEntries", req, resp); err != nil {
			return nil, pages, err
		}
		pages++
		for _, e := range resp.Entries {
			if e.Account != account {
				return nil, pages, fmt.Errorf("entry %s is of account %s", e.Entry, e.Account)
			}
			out = append(out, e.Entry)
		}
		if resp.NextPageToken == "" {
			return out, pages, nil
		}
		req.PageToken = resp.NextPageToken
	}
}

func listTotals(ctx context.Context, c *query.Client, limit int32) ([]*testpb.Total, int, error) {
	var out []*testpb.Total
	var pages int
	var req = &testpb.ListTotalsRequest{Limit: limit}
	for {
		var resp = new(testpb.ListTotalsResponse)
		if err := c.Invoke(ctx, testQueries, "ListTotals", req, resp); err != nil {
			return nil, pages, err
		}
		pages++
		out = append(out, resp.Totals...)
		if resp.NextPageToken == "" {
			return out, pages, nil
		}
		req.PageToken = resp.NextPageToken
	}
}

// primaryOf returns the member that is the primary of the shard holding
// account.
func (f *fixture) primaryOf(account string) *membertest.Member {
	f.t.Helper()
	var journal, _, err = f.mapping(&testpb.Deposit{Account: account})
	if err != nil {
		f.t.Fatal(err)
	}
	var i int
	if _, err = fmt.Sscanf(journal.String(), f.prefix+"/deposits/part-%02d", &i); err != nil {
		f.t.Fatal(err)
	}
	m, err := f.c.PrimaryOf(f.ctx, shardID(i))
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// Two members and four shards: every query is answered alike through
// either member and by a routed client, rows in key order and paged; calls
// of a shard whose primary is the other member are proxied to it; a scan
// of every shard merges them in key order; a GET asking every shard finds
// its row, and a missing row is NotFound, naming the shard.
func TestRoutingAndProxying(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var f = newFixture(t, ctx, 4, nil)
	var accounts []string
	for i := range 24 {
		var account = fmt.Sprintf("acct-%02d", i)
		accounts = append(accounts, account)
		for j := range i%5 + 1 {
			f.deposit(account, int64(100*i+j), false)
		}
	}
	f.caughtUp()

	// Both members are the primary of some shards, so that calls through
	// either are proxied for the others'.
	var proxied = map[string]int{}
	for _, account := range accounts {
		var p = f.primaryOf(account)
		for _, m := range f.members {
			if m != p {
				proxied[m.ID().Suffix]++
			}
		}
	}
	if len(proxied) != 2 {
		t.Fatalf("one member is the primary of every account's shard: %v", proxied)
	}

	var clients = map[string]*query.Client{
		"through member-a": f.through(f.members[0]),
		"through member-b": f.through(f.members[1]),
		"routed":           f.routed(),
	}
	var wantTotals []*testpb.Total
	for _, account := range accounts {
		wantTotals = append(wantTotals, f.want[account])
	}
	for name, c := range clients {
		for _, account := range accounts {
			var got, err = getTotal(ctx, c, account)
			if err != nil {
				t.Fatalf("%s: GetTotal(%s): %v", name, account, err)
			} else if !proto.Equal(got, f.want[account]) {
				t.Fatalf("%s: GetTotal(%s) = %v, want %v", name, account, got, f.want[account])
			}
			entries, pages, err := listEntries(ctx, c, account, 2)
			if err != nil {
				t.Fatalf("%s: ListEntries(%s): %v", name, account, err)
			} else if !slices.Equal(entries, f.entries[account]) || pages != (len(entries)+1)/2 {
				t.Fatalf("%s: ListEntries(%s) = %v in %d pages, want %v", name, account, entries, pages, f.entries[account])
			}
		}
		var totals, pages, err = listTotals(ctx, c, 5)
		if err != nil {
			t.Fatalf("%s: ListTotals: %v", name, err)
		} else if !slices.EqualFunc(totals, wantTotals, func(a, b *testpb.Total) bool { return proto.Equal(a, b) }) {
			t.Fatalf("%s: ListTotals = %v, want %v", name, totals, wantTotals)
		} else if pages != 5 {
			t.Fatalf("%s: ListTotals in %d pages of 5, want 5", name, pages)
		}

		var found = new(testpb.EntryAccount)
		var entry = f.entries["acct-13"][2]
		if err = c.Invoke(ctx, testQueries, "FindEntry", &testpb.FindEntryRequest{Entry: entry}, found); err != nil || found.Account != "acct-13" {
			t.Fatalf("%s: FindEntry(%s) = %v, %v", name, entry, found, err)
		}
		err = c.Invoke(ctx, testQueries, "FindEntry", &testpb.FindEntryRequest{Entry: "nope"}, found)
		if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "any of the 4 shards") {
			t.Fatalf("%s: FindEntry(nope): %v", name, err)
		}
		_, err = getTotal(ctx, c, "nobody")
		if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "in shard q-0") {
			t.Fatalf("%s: GetTotal(nobody): %v", name, err)
		}
	}
}

func metadataContext(ctx context.Context, kv ...string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// Malformed requests fail with InvalidArgument naming the field, before
// any shard is asked; so does a call with malformed routing metadata.
func TestMalformedRequests(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var f = newFixture(t, ctx, 2, nil)
	for i := range 6 {
		f.deposit(fmt.Sprintf("acct-%d", i), 10, false)
		f.deposit(fmt.Sprintf("acct-%d", i), 20, false)
	}
	f.caughtUp()
	var c = f.through(f.members[1])

	var page = new(testpb.ListTotalsResponse)
	if err := c.Invoke(ctx, testQueries, "ListTotals", &testpb.ListTotalsRequest{Limit: 2}, page); err != nil {
		t.Fatal(err)
	}
	var other = new(testpb.ListEntriesResponse)
	if err := c.Invoke(ctx, testQueries, "ListEntries", &testpb.ListEntriesRequest{Account: "acct-1", Limit: 1}, other); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method    string
		req, resp proto.Message
		want      string
	}{
		{"ListTotals", &testpb.ListTotalsRequest{Limit: -1}, new(testpb.ListTotalsResponse), "field limit: the limit must not be negative"},
		{"ListTotals", &testpb.ListTotalsRequest{PageToken: "%%%"}, new(testpb.ListTotalsResponse), "field page_token: not a page token"},
		{"ListEntries", &testpb.ListEntriesRequest{Account: "acct-2", PageToken: page.NextPageToken}, new(testpb.ListEntriesResponse),
			"field page_token: the token is not of a page of this request's scan"},
		{"ListEntries", &testpb.ListEntriesRequest{Account: "acct-2", PageToken: other.NextPageToken}, new(testpb.ListEntriesResponse),
			"field page_token: the token is not of a page of this request's scan"},
		{"FindEntry", &testpb.FindEntryRequest{}, new(testpb.EntryAccount), "field entry: must not be empty"},
	} {
		// Through a member, so that it's the member that refuses.
		var conn, err = grpc.NewClient(f.members[0].Svc.Endpoint().GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		err = conn.Invoke(ctx, testQueries.FullMethod(tc.method), tc.req, tc.resp)
		_ = conn.Close()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s(%v): %v, want InvalidArgument %q", tc.method, tc.req, err, tc.want)
		}
		// A client refuses it as well, without a call.
		if err = c.Invoke(ctx, testQueries, tc.method, tc.req, tc.resp); status.Code(err) != codes.InvalidArgument {
			t.Errorf("client %s(%v): %v", tc.method, tc.req, err)
		}
	}
	var ctxBad = metadataContext(ctx, query.RevisionMetadata, "yesterday")
	if _, err := getTotal(ctxBad, c, "acct-1"); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), query.RevisionMetadata) {
		t.Errorf("a malformed revision: %v", err)
	}
}

// A query while a transaction is open does not see its writes: the held
// deposit's transaction has written the account's total, and a query
// answers the total before it; once the transaction commits, queries see
// it.
func TestCommittedOnly(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var f = newFixture(t, ctx, 2, nil)
	f.deposit("ann", 100, false)
	f.caughtUp()
	var c = f.routed()
	var before, err = getTotal(ctx, c, "ann")
	if err != nil || before.Cents != 100 {
		t.Fatalf("before: %v, %v", before, err)
	}

	f.deposit("ann", 50, true)
	select {
	case <-f.bank.held:
	case <-ctx.Done():
		t.Fatal("the held deposit was never consumed")
	}
	// Its transaction is open, its writes made: unseen.
	for range 5 {
		var got, err = getTotal(ctx, c, "ann")
		if err != nil || !proto.Equal(got, before) {
			t.Fatalf("while the transaction is open: %v, %v; want %v", got, err, before)
		}
		entries, _, err := listEntries(ctx, c, "ann", 10)
		if err != nil || len(entries) != 1 {
			t.Fatalf("entries while the transaction is open: %v, %v", entries, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(f.bank.release)
	f.caughtUp()
	var after, _ = getTotal(ctx, c, "ann")
	if after.GetCents() != 150 || after.GetDeposits() != 2 {
		t.Fatalf("after the commit: %v", after)
	}
}
