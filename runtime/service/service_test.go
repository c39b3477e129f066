package service_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/service"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	"go.gazette.dev/core/auth"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// addMsg adds Value to the sum of Key.
type addMsg struct {
	UUID  message.UUID
	Key   string
	Value int64
}

func (m *addMsg) GetUUID() message.UUID                         { return m.UUID }
func (m *addMsg) SetUUID(u message.UUID)                        { m.UUID = u }
func (m *addMsg) NewAcknowledgement(pb.Journal) message.Message { return new(addMsg) }

// sumApp keeps a sum per key in a RocksDB store recorded into the shard's
// recovery log.
type sumApp struct{}

func (sumApp) NewStore(_ runtime.Shard, rec runtime.Recorder) (runtime.Store, error) {
	var fr, ok = rec.(rocks.FileRecorder)
	if !ok {
		return nil, fmt.Errorf("the store needs a recovery log")
	}
	return rocks.Open(rec.Dir(), fr, rocks.Options{})
}

func (sumApp) NewMessage(*pb.JournalSpec) (message.Message, error) { return new(addMsg), nil }

func (sumApp) ConsumeMessage(_ runtime.Shard, st runtime.Store, env message.Envelope, pub *message.Publisher) error {
	var m = env.Message.(*addMsg)
	var kv = st.(runtime.KVStore).KV()
	var v, _, err = kv.Get([]byte(m.Key))
	if err != nil {
		return err
	}
	var sum int64
	if len(v) == 8 {
		sum = int64(binary.BigEndian.Uint64(v))
	}
	if err = kv.Put([]byte(m.Key), binary.BigEndian.AppendUint64(nil, uint64(sum+m.Value))); err != nil {
		return err
	}
	// Publish the addition onward: it must be read exactly once downstream.
	_, err = pub.PublishUncommitted(toOutput, &addMsg{Key: m.Key, Value: m.Value})
	return err
}

func toOutput(message.Mappable) (pb.Journal, string, error) {
	return "sums/output", "application/x-ndjson", nil
}

func (sumApp) FinalizeTxn(runtime.Shard, runtime.Store, *message.Publisher) error { return nil }

const journalsYAML = `
name: sums/
replication: 1
fragment:
  length: 1048576
  stores: [file:///]
  refresh_interval: 1s
  compression_codec: NONE
children:
  - name: sums/input/
    labels:
      - name: content-type
        value: application/x-ndjson
    children:
      - name: sums/input/part-0
      - name: sums/input/part-1
  - name: sums/output
    labels:
      - name: content-type
        value: application/x-ndjson
  - name: sums/recovery/
    labels:
      - name: content-type
        value: application/x-gazette-recoverylog
    children:
      - name: sums/recovery/shard-0
      - name: sums/recovery/shard-1
`

type member struct {
	svc    *service.Service
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// stop stops the member gracefully, or waits for it if it was aborted.
func (m *member) stop() error {
	m.once.Do(func() {
		m.cancel()
		m.err = <-m.done
	})
	return m.err
}

func startMember(t *testing.T, stack *devstacktest.Stack, id string) *member {
	t.Helper()
	var svc, err = service.New(service.Config{
		App:           sumApp{},
		Etcd:          stack.Etcd(),
		Prefix:        "/gazette/consumers/sums",
		Journals:      stack.Journals(),
		ID:            id,
		LeaseTTL:      3 * time.Second,
		StateDir:      t.TempDir(),
		HintsInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	var ctx, cancel = context.WithCancel(context.Background())
	var m = &member{svc: svc, cancel: cancel, done: make(chan error, 1)}
	go func() {
		var err = svc.Run(ctx, 10*time.Second)
		if err != nil {
			t.Logf("member %s: %v", id, err)
		}
		m.done <- err
	}()
	return m
}

func shardClient(t *testing.T, ep pb.Endpoint) pc.ShardClient {
	t.Helper()
	var conn, err = grpc.NewClient(ep.GRPCAddr(),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pc.NewAuthShardClient(pc.NewShardClient(conn), auth.NewNoopAuth())
}

func TestShardsFailOverWithExactState(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var stack = devstacktest.StartT(t, journalsYAML)
	var err error

	var a, b = startMember(t, stack, "member-a"), startMember(t, stack, "member-b")
	defer a.stop()
	defer b.stop()
	var sc = shardClient(t, a.svc.Endpoint())

	// An invalid spec is refused and changes nothing.
	var bad = shardSpec(0)
	bad.Sources[0].Journal = "sums/input/missing"
	if _, err = sc.Apply(ctx, &pc.ApplyRequest{Changes: []pc.ApplyRequest_Change{{Upsert: bad}}}); status.Code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), "sums/input/missing") {
		t.Fatalf("applying a spec with a missing source: %v", err)
	}

	var req = &pc.ApplyRequest{}
	for i := range 2 {
		req.Changes = append(req.Changes, pc.ApplyRequest_Change{Upsert: shardSpec(i)})
	}
	if resp, err := sc.Apply(ctx, req); err != nil || resp.Status != pc.Status_OK {
		t.Fatalf("Apply: %v %v", resp, err)
	}

	var pub = message.NewPublisher(client.NewAppendService(ctx, stack.Journals()), nil)
	var want = make(map[string]int64)
	var publish = func(n int) {
		for i := range n {
			var m = &addMsg{Key: fmt.Sprintf("key-%d", i%7), Value: int64(i)}
			want[m.Key] += m.Value
			var part = pb.Journal(fmt.Sprintf("sums/input/part-%d", i%2))
			if _, err := pub.PublishCommitted(func(message.Mappable) (pb.Journal, string, error) {
				return part, "application/x-ndjson", nil
			}, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(500)
	waitCaughtUp(t, ctx, stack, a, b)

	// Gazette's own gazctl lists the shards through a member's Shard API.
	var out = gazctl(t, a.svc.Endpoint(), "shards", "list", "--primary", "--replicas")
	for _, want := range []string{"shard-0", "shard-1", "PRIMARY", "member-a", "member-b"} {
		if !strings.Contains(out, want) {
			t.Errorf("gazctl shards list lacks %q:\n%s", want, out)
		}
	}

	// Lose the member that is primary of shard-0, abruptly, while more
	// messages flow: its standby takes over.
	var lost = primaryOf(t, ctx, sc, "shard-0", a, b)
	lost.svc.Abort()
	if err = lost.stop(); err != nil {
		t.Fatalf("aborted member: %v", err)
	}
	var live = a
	if lost == a {
		live = b
	}
	publish(500)
	waitCaughtUp(t, ctx, stack, live)

	// Stop everything, then rebuild each shard's store from its recovery log
	// and check the sums are exact: no message lost, none counted twice.
	for _, m := range []*member{a, b} {
		if err = m.stop(); err != nil {
			t.Fatalf("stopping member %s: %v", m.svc.ID().Suffix, err)
		}
	}

	var got = make(map[string]int64)
	for i := range 2 {
		for k, v := range playSums(t, ctx, stack, i) {
			got[k] += v
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("sums after fail-over:\n got %v\nwant %v", got, want)
	}

	// Read the published additions read-committed: each input was published
	// onward exactly once, though a transaction of the lost member published
	// some of them before it failed.
	var published, n = readCommittedSums(t, ctx, stack)
	if n != 1000 || fmt.Sprint(published) != fmt.Sprint(want) {
		t.Fatalf("read %d published messages, summing to\n %v\nwant 1000 summing to\n %v", n, published, want)
	}
}

// readCommittedSums reads sums/output through its write head, read-committed.
func readCommittedSums(t *testing.T, ctx context.Context, stack *devstacktest.Stack) (map[string]int64, int) {
	t.Helper()
	var head, err = client.Append(ctx, stack.Journals(), pb.AppendRequest{Journal: "sums/output"})
	if err != nil {
		t.Fatal(err)
	}
	var rr = client.NewRetryReader(ctx, stack.Journals(), pb.ReadRequest{Journal: "sums/output", EndOffset: head.Commit.End})
	var it = message.NewReadCommittedIter(rr, func(*pb.JournalSpec) (message.Message, error) { return new(addMsg), nil },
		message.NewSequencer(nil, nil, 1024))
	var sums = make(map[string]int64)
	var n int
	for {
		var env, err = it.Next()
		if errors.Is(err, io.EOF) {
			return sums, n
		} else if err != nil {
			t.Fatalf("reading sums/output: %v", err)
		}
		if message.GetFlags(env.Message.GetUUID()) == message.Flag_ACK_TXN {
			continue
		}
		var m = env.Message.(*addMsg)
		sums[m.Key] += m.Value
		n++
	}
}

// gazctl runs Gazette's gazctl (as `make setup` builds it, or built now)
// against the consumer at ep.
func gazctl(t *testing.T, ep pb.Endpoint, args ...string) string {
	t.Helper()
	var bin, err = filepath.Abs("../../.tools/bin/gazctl")
	if err != nil {
		t.Fatal(err)
	}
	if _, err = os.Stat(bin); err != nil {
		bin = filepath.Join(t.TempDir(), "gazctl")
		if out, err := exec.Command("go", "build", "-o", bin, "go.gazette.dev/core/cmd/gazctl").CombinedOutput(); err != nil {
			t.Fatalf("building gazctl: %v\n%s", err, out)
		}
	}
	var cmd = exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "CONSUMER_ADDRESS="+ep.URL().String(), "BROKER_ADDRESS=http://127.0.0.1:1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("gazctl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func shardSpec(i int) *pc.ShardSpec {
	return &pc.ShardSpec{
		Id:                pc.ShardID(fmt.Sprintf("shard-%d", i)),
		Sources:           []pc.ShardSpec_Source{{Journal: pb.Journal(fmt.Sprintf("sums/input/part-%d", i))}},
		RecoveryLogPrefix: "sums/recovery",
		HintPrefix:        "/gazette/hints",
		HintBackups:       2,
		MinTxnDuration:    time.Millisecond,
		MaxTxnDuration:    100 * time.Millisecond,
		HotStandbys:       1,
	}
}

func primaryOf(t *testing.T, ctx context.Context, sc pc.ShardClient, id pc.ShardID, members ...*member) *member {
	t.Helper()
	for {
		var resp, err = sc.List(ctx, &pc.ListRequest{Selector: pb.LabelSelector{Include: pb.MustLabelSet("id", id.String())}})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Shards) == 1 && resp.Shards[0].Route.Primary != -1 {
			var rt = resp.Shards[0].Route
			for _, m := range members {
				if rt.Members[rt.Primary] == m.svc.ID() && resp.Shards[0].Status[rt.Primary].Code == pc.ReplicaStatus_PRIMARY {
					return m
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("shard %s has no primary", id)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitCaughtUp waits until each shard's primary has committed reads through
// its source's write head.
func waitCaughtUp(t *testing.T, ctx context.Context, stack *devstacktest.Stack, members ...*member) {
	t.Helper()
	for i := range 2 {
		var id = pc.ShardID(fmt.Sprintf("shard-%d", i))
		var journal = pb.Journal(fmt.Sprintf("sums/input/part-%d", i))
		var head, err = client.Append(ctx, stack.Journals(), pb.AppendRequest{Journal: journal})
		if err != nil {
			t.Fatal(err)
		}
		for {
			var m = primaryOf(t, ctx, shardClient(t, members[0].svc.Endpoint()), id, members...)
			var resp, err = shardClient(t, m.svc.Endpoint()).Stat(ctx, &pc.StatRequest{
				Shard: id, ReadThrough: pb.Offsets{journal: head.Commit.End},
			})
			if err == nil && resp.Status == pc.Status_OK {
				break
			} else if ctx.Err() != nil {
				t.Fatalf("shard %s did not catch up: %v %v", id, resp, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// playSums plays shard i's recovery log into a new directory and reads its sums.
func playSums(t *testing.T, ctx context.Context, stack *devstacktest.Stack, i int) map[string]int64 {
	t.Helper()
	var hints, err = recoverylog.FetchHints(ctx, stack.Etcd(), shardSpec(i).HintPrimaryKey(), 1)
	if err != nil {
		t.Fatal(err)
	}
	var dir = t.TempDir()
	var player = recoverylog.NewPlayer(stack.Journals(), shardSpec(i).RecoveryLog(), dir, recoverylog.Author(0xfeed+i))
	player.FinishAtWriteHead()
	fsm, err := player.Play(ctx, hints[0])
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recoverylog.NewRecorder(shardSpec(i).RecoveryLog(), fsm, recoverylog.Author(0xfeed+i), dir, client.NewAppendService(ctx, stack.Journals()))
	if err != nil {
		t.Fatal(err)
	}
	st, err := rocks.Open(dir, rec, rocks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Destroy()
	var out = make(map[string]int64)
	if err = st.KV().Scan([]byte("key-"), []byte("key."), func(k, v []byte) bool {
		if len(v) == 8 {
			out[string(k)] = int64(binary.BigEndian.Uint64(v))
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return out
}
