package console

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/membertest/sums"
)

var stack *devstacktest.Stack

func TestMain(m *testing.M) { os.Exit(devstacktest.Run(m, "", &stack)) }

// newConsole returns a Console of the test stack calling members with sec,
// closed when t ends.
func newConsole(t *testing.T, sec brokerconn.Security) *Console {
	t.Helper()
	var c, err = New(Config{Etcd: stack.Etcd(), Journals: stack.Journals(), Members: sec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// get serves path, and returns the status and body of the answer.
func get(t *testing.T, c *Console, path string) (int, string) {
	t.Helper()
	var w = httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	return w.Code, w.Body.String()
}

// expect fails t unless page holds each of wants.
func expect(t *testing.T, what, page string, wants ...string) {
	t.Helper()
	for _, want := range wants {
		if !strings.Contains(page, want) {
			t.Errorf("%s lacks %q:\n%s", what, want, page)
		}
	}
}

// startSums starts a sums cluster of 2 shards with members, applies its
// shards and waits for their primaries; edit configures the cluster.
func startSums(t *testing.T, ctx context.Context, name string, members int, edit func(*membertest.Cluster)) *sums.Cluster {
	t.Helper()
	var c, err = sums.New(ctx, stack.Stack, name, 2, t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	c.Handoff = time.Second
	if edit != nil {
		edit(c.Cluster)
	}
	t.Cleanup(c.Close)
	var first *membertest.Member
	for i := range members {
		var m, err = c.Start(name + "-" + string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Stop() })
		if first == nil {
			first = m
		}
	}
	if err = c.ApplyShards(ctx, first, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err = c.PrimaryOf(ctx, sums.ShardID(i)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// The console reads a group's members, shards, replicas, sources and
// counters, rates them between readings, and serves them on its pages, its
// series and its reading; and lists the group's journals.
func TestConsoleReadsAGroup(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var name = stack.Name("cread") // Anew in each run of go test -count=N.
	var sc = startSums(t, ctx, name, 2, nil)
	var feed = sc.NewFeed(ctx)
	if err := feed.Publish(200); err != nil {
		t.Fatal(err)
	}
	if err := sc.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sc.WaitStandbys(ctx); err != nil { // BACKFILL until they tail their logs.
		t.Fatal(err)
	}
	var c = newConsole(t, brokerconn.Security{})

	var first = c.s.sample(ctx)
	var g = first.Group(name)
	if g == nil {
		t.Fatalf("no group %s in %+v", name, first)
	} else if g.Prefix != "/gazette/consumers/"+name || len(g.Members) != 2 || len(g.Shards) != 2 || len(g.Errors) != 0 {
		t.Fatalf("group %+v, errors %v", g, g.Errors)
	}
	var primaries int
	for _, m := range g.Members {
		primaries += m.Primaries
		if m.Err != "" || m.Replicas != 2 {
			t.Errorf("member %+v", m)
		}
	}
	if primaries != 2 {
		t.Errorf("members are the primaries of %d shards", primaries)
	}
	for i, sh := range g.Shards {
		if sh.ID != sums.ShardID(i).String() || sh.Status != StatusPrimary || sh.Err != "" || sh.Lag != 0 || len(sh.Replicas) != 2 {
			t.Errorf("shard %d: %+v", i, sh)
		}
		if len(sh.Sources) != 1 || sh.Sources[0].Journal != sc.Input(i) || sh.Sources[0].WriteHead <= 0 ||
			sh.Sources[0].ReadThrough != sh.Sources[0].WriteHead || sh.Sources[0].Lag != 0 {
			t.Errorf("shard %d's sources: %+v", i, sh.Sources[0])
		}
		if sh.Messages < 100 || sh.Transactions < 1 || sh.TxnCount < 1 || len(sh.Phases) == 0 {
			t.Errorf("shard %d's counters: %+v", i, sh)
		}
		if sh.MsgRate != -1 {
			t.Errorf("shard %d has a rate of one reading: %v", i, sh.MsgRate)
		}
		var standby = sh.Replicas[0]
		if standby.Primary {
			standby = sh.Replicas[1]
		}
		if standby.Code != pc.ReplicaStatus_STANDBY.String() || standby.Primary {
			t.Errorf("shard %d's standby replica: %+v", i, standby)
		}
	}

	// A second reading rates the messages consumed since the first.
	if err := feed.Publish(200); err != nil {
		t.Fatal(err)
	}
	if err := sc.WaitCaughtUp(ctx); err != nil {
		t.Fatal(err)
	}
	var second = c.s.sample(ctx)
	for _, sh := range second.Group(name).Shards {
		if sh.MsgRate <= 0 || sh.TxnRate <= 0 {
			t.Errorf("shard %s: rates %v, %v", sh.ID, sh.MsgRate, sh.TxnRate)
		}
	}

	var code, page = get(t, c, "/")
	if code != http.StatusOK {
		t.Fatalf("/: %d\n%s", code, page)
	}
	expect(t, "the consumers page", page, `data-group="`+name+`"`, `data-shard="shard-0" data-status="PRIMARY"`, name+"-a", name+"-b", `data-src="/api/series?group=`+name+`"`)
	if code, page = get(t, c, "/?fragment=1"); code != http.StatusOK || strings.Contains(page, "<html") || !strings.Contains(page, `data-group="`+name+`"`) {
		t.Errorf("/?fragment=1: %d\n%s", code, page)
	}
	code, page = get(t, c, "/shard?group="+name+"&id=shard-1")
	if code != http.StatusOK {
		t.Fatalf("/shard: %d\n%s", code, page)
	}
	expect(t, "the shard page", page, name+"/input/part-1", `id="shard-lag" data-lag="0"`, "STANDBY", name+"/recovery/shard-1", "consume")
	if code, page = get(t, c, "/shard?group="+name+"&id=shard-9"); code != http.StatusNotFound || !strings.Contains(page, `consumer group `+name+` has no shard &#34;shard-9&#34;`) {
		t.Errorf("the page of a missing shard: %d\n%s", code, page)
	}

	code, page = get(t, c, "/api/series?group="+name)
	var series Series
	if err := json.Unmarshal([]byte(page), &series); err != nil || code != http.StatusOK {
		t.Fatalf("/api/series: %d %v\n%s", code, err, page)
	}
	if len(series.T) < 2 || len(series.Shards) != 2 || series.Shards[0].ID != "shard-0" {
		t.Fatalf("series %+v", series)
	}
	var last = len(series.T) - 1
	for _, s := range series.Shards {
		if s.Rate[last] == nil || *s.Rate[last] <= 0 || s.Lag[last] == nil || *s.Lag[last] != 0 {
			t.Errorf("series of %s: rate %v, lag %v", s.ID, s.Rate[last], s.Lag[last])
		}
	}
	code, page = get(t, c, "/api/reading")
	var reading Reading
	if err := json.Unmarshal([]byte(page), &reading); err != nil || code != http.StatusOK || reading.Group(name) == nil {
		t.Errorf("/api/reading: %d %v\n%s", code, err, page)
	}

	code, page = get(t, c, "/journals?l=name:prefix="+name+"/")
	if code != http.StatusOK {
		t.Fatalf("/journals: %d\n%s", code, page)
	}
	expect(t, "the journals page", page, name+"/input/", `data-journal="`+name+`/input/part-0"`, name+"/recovery/")
	if strings.Contains(page, `class="error"`) {
		t.Errorf("the journals page shows an error:\n%s", page)
	}
	code, page = get(t, c, "/journal?name="+name+"/input/part-0")
	expect(t, "the journal page", page, "Fragments", "write head")
	if code != http.StatusOK || strings.Contains(page, "No fragment yet") {
		t.Errorf("/journal: %d\n%s", code, page)
	}
	if code, page = get(t, c, "/journal?name="+name+"/none"); code != http.StatusNotFound || !strings.Contains(page, "the brokers list no journal") {
		t.Errorf("the page of a missing journal: %d\n%s", code, page)
	}
	if code, page = get(t, c, "/journals?l=a%20b%20c"); !strings.Contains(page, `label selector &#34;a b c&#34;`) {
		t.Errorf("the journals of a bad selector: %d\n%s", code, page)
	}

	// Its members serve no queries service: the state browser says so.
	code, page = get(t, c, "/state?group="+name)
	expect(t, "the state browser", page, "the members of group "+name+" serve no queries service")
}

// What the console cannot read is shown, on the page of what it concerns:
// a group without members, a member down, a token refused, a failed shard.
func TestConsoleShowsWhatItCannotRead(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A group whose members are all gone, and one whose member is down
	// (its spec outlived it).
	var orphan = groupkeys.NewKeySpace("/gazette/consumers/orphan")
	var spec = &pc.ShardSpec{Id: "orphan-0", Sources: []pc.ShardSpec_Source{{Journal: "orphan/in"}}, MaxTxnDuration: time.Second}
	if _, err := stack.Etcd().Put(ctx, allocator.ItemKey(orphan, "orphan-0"), spec.MarshalString()); err != nil {
		t.Fatal(err)
	}
	var dead = groupkeys.NewKeySpace("/gazette/consumers/downed")
	var member = &pc.ConsumerSpec{ProcessSpec: pb.ProcessSpec{Id: pb.ProcessSpec_ID{Zone: "local", Suffix: "gone"}, Endpoint: "http://127.0.0.1:1"}, ShardLimit: 10}
	if _, err := stack.Etcd().Put(ctx, allocator.MemberKey(dead, "local", "gone"), member.MarshalString()); err != nil {
		t.Fatal(err)
	}

	// A group whose members refuse the console's calls: it has no keys.
	var raw = make([]byte, 32)
	_, _ = rand.Read(raw)
	var keyed, err = auth.NewKeyedAuth(base64.StdEncoding.EncodeToString(raw))
	if err != nil {
		t.Fatal(err)
	}
	var secured = stack.Name("csecured")
	startSums(t, ctx, secured, 1, func(c *membertest.Cluster) { c.Verifier, c.Authorizer = keyed, keyed })

	var c = newConsole(t, brokerconn.Security{})
	var code, page = get(t, c, "/")
	if code != http.StatusOK {
		t.Fatalf("/: %d\n%s", code, page)
	}
	var rd = c.s.last()
	if g := rd.Group("orphan"); g == nil || len(g.Shards) != 1 || g.Shards[0].Status != StatusUnassigned ||
		!strings.Contains(strings.Join(g.Errors, "\n"), "no member of the group is running") {
		t.Errorf("the group without members: %+v", g)
	}
	if g := rd.Group("downed"); g == nil || len(g.Members) != 1 || g.Members[0].Err == "" ||
		!strings.Contains(strings.Join(g.Errors, "\n"), "listing the shards through member gone (http://127.0.0.1:1)") {
		t.Errorf("the group whose member is down: %+v", g)
	}
	var g = rd.Group(secured)
	if g == nil || len(g.Shards) != 2 || g.Shards[0].Status != StatusUnknown || !strings.Contains(strings.Join(g.Errors, "\n"), "Unauthenticated") {
		t.Errorf("the group refusing the console's token: %+v", g)
	}
	expect(t, "the consumers page", page, "no member of the group is running", "UNASSIGNED",
		"listing the shards through member gone", "Unauthenticated", "UNKNOWN")

	// A failed shard is listed first, and its page shows its error.
	var failed = &Reading{At: time.Now(), Groups: []*Group{{Name: "bank", Prefix: "/gazette/consumers/bank", MsgRate: -1, TxnRate: -1}}}
	var ls = pc.ListResponse_Shard{
		Spec:   pc.ShardSpec{Id: "bank-01", Sources: []pc.ShardSpec_Source{{Journal: "bank/in/part-01"}}},
		Route:  pb.Route{Primary: 0, Members: []pb.ProcessSpec_ID{{Zone: "local", Suffix: "m1"}}, Endpoints: []pb.Endpoint{"http://127.0.0.1:1"}},
		Status: []pc.ReplicaStatus{{Code: pc.ReplicaStatus_FAILED, Errors: []string{"shard bank-01: OnOrder of bank/in/part-01 at offset 1234: boom"}}},
	}
	var ok = pc.ListResponse_Shard{
		Spec:   pc.ShardSpec{Id: "bank-00"},
		Route:  pb.Route{Primary: 0, Members: []pb.ProcessSpec_ID{{Zone: "local", Suffix: "m1"}}, Endpoints: []pb.Endpoint{"http://127.0.0.1:1"}},
		Status: []pc.ReplicaStatus{{Code: pc.ReplicaStatus_PRIMARY}},
	}
	failed.Groups[0].Shards = []*Shard{newShard("bank", &ok), newShard("bank", &ls)}
	// bank-00's standby is recovering: half its log played, at 1 KiB/s.
	failed.Groups[0].Shards[0].Replicas = append(failed.Groups[0].Shards[0].Replicas,
		&Replica{Member: "m2", Endpoint: "http://127.0.0.1:2", Code: pc.ReplicaStatus_BACKFILL.String(), Played: 10 << 10, Remaining: 10 << 10, PlayRate: 1 << 10})
	sortShards(failed.Groups[0].Shards)
	c.s.mu.Lock()
	c.s.history = append(c.s.history, failed)
	c.s.mu.Unlock()
	code, page = get(t, c, "/")
	if i, j := strings.Index(page, `data-shard="bank-01" data-status="FAILED"`), strings.Index(page, `data-shard="bank-00" data-status="PRIMARY"`); code != http.StatusOK || i < 0 || j < 0 || i > j {
		t.Errorf("the failed shard is not listed first:\n%s", page)
	}
	code, page = get(t, c, "/shard?group=bank&id=bank-01")
	expect(t, "the failed shard's page", page, "Last error", "OnOrder of bank/in/part-01 at offset 1234: boom", "FAILED")
	if code != http.StatusOK {
		t.Errorf("the failed shard's page: %d", code)
	}
	code, page = get(t, c, "/shard?group=bank&id=bank-00")
	expect(t, "the page of a shard whose standby recovers", page, "BACKFILL", "10.0 KiB of 20.0 KiB", "width: 50%", "10s")
	if code != http.StatusOK {
		t.Errorf("the page of a shard whose standby recovers: %d", code)
	}
	if code, page = get(t, c, "/state?group=bank"); !strings.Contains(page, "no member of the group is running") {
		t.Errorf("the state of a group without members: %d\n%s", code, page)
	}
}
