package service_test

import (
	"context"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/service"
	"github.com/gazconsumer/gazconsumer/runtime/service/internal/sums"
	"go.gazette.dev/core/allocator"
	pc "go.gazette.dev/core/consumer/protocol"
)

func TestServeFromFlagsAndEnvironment(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c = newCluster(t, 1)
	var stack = c.Stack
	var err error

	// The environment, as Gazette's own consumers read it; a flag overrides it.
	t.Setenv("ETCD_ADDRESS", stack.EtcdURL())
	t.Setenv("BROKER_ADDRESS", string(stack.Brokers()[0].Endpoint()))
	t.Setenv("CONSUMER_ID", "from-env")
	t.Setenv("ETCD_LEASE_TTL", "4s")
	var f service.Flags
	var fs = flag.NewFlagSet(c.Name, flag.ContinueOnError)
	f.Register(fs, c.Name)
	if err = fs.Parse([]string{"--consumer.id=deployed-1", "--consumer.host=127.0.0.1", "--consumer.state-dir=" + t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	if f.EtcdPrefix != c.Prefix() || f.ID != "deployed-1" || f.EtcdAddress != stack.EtcdURL() || f.EtcdLeaseTTL != 4*time.Second {
		t.Fatalf("flags = %+v", f)
	}

	var runCtx, stop = context.WithCancel(ctx)
	var done = make(chan error, 1)
	go func() {
		done <- service.Serve(runCtx, f, func(d service.Deps) (runtime.Application, error) {
			if d.Journals == nil || d.Partitions == nil {
				t.Error("Deps lack the journal client or partitions")
			}
			return sums.App{Output: c.Output()}, nil
		})
	}()

	// The member takes a shard applied through etcd and becomes its primary.
	var spec = c.ShardSpec(0)
	spec.HotStandbys = 0
	var ks = service.NewKeySpace(f.EtcdPrefix)
	if _, err = stack.Etcd().Put(ctx, allocator.ItemKey(ks, spec.Id.String()), spec.MarshalString()); err != nil {
		t.Fatal(err)
	}
	for {
		var resp, err = stack.Etcd().Get(ctx, allocator.ItemAssignmentsPrefix(ks, spec.Id.String())+"local#deployed-1#0")
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 1 {
			var st pc.ReplicaStatus
			if err = st.Unmarshal(resp.Kvs[0].Value); err == nil && st.Code == pc.ReplicaStatus_PRIMARY {
				break
			}
		}
		select {
		case err = <-done:
			t.Fatalf("Serve returned early: %v", err)
		case <-ctx.Done():
			t.Fatal("the deployed member never became primary")
		case <-time.After(20 * time.Millisecond):
		}
	}
	stop()
	if err = <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}

	// A bad broker address is refused before anything starts.
	f.BrokerAddress = "not a url"
	if err = service.Serve(ctx, f, nil); err == nil || !strings.Contains(err.Error(), "--broker.address") {
		t.Fatalf("Serve with a bad broker address: %v", err)
	}
}
