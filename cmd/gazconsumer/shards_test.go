package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime/service"
	"go.gazette.dev/core/allocator"
	pc "go.gazette.dev/core/consumer/protocol"
)

func TestShardsHintsPrintsStoredGenerations(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stack = devstacktest.StartT(t, "")
	var err error

	var spec = &pc.ShardSpec{
		Id: "orders-0", RecoveryLogPrefix: "recovery/orders", HintPrefix: "/gazette/hints",
		HintBackups: 1, MaxTxnDuration: time.Second,
	}
	const prefix = "/gazette/consumers/orders"
	if _, err = stack.Etcd().Put(ctx, allocator.ItemKey(service.NewKeySpace(prefix), "orders-0"), spec.MarshalString()); err != nil {
		t.Fatal(err)
	}
	var flags = hintsFlags{etcd: stack.EtcdURL(), prefix: prefix, shard: "orders-0"}

	var out bytes.Buffer
	if err = runHints(ctx, &out, flags); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "# generation 0: none") || !strings.Contains(got, "# generation 1: none") {
		t.Fatalf("without hints, printed:\n%s", got)
	}

	var h = recoverylog.NewFSM().Hints("recovery/orders/orders-0")
	if err = recoverylog.StoreHints(ctx, stack.Etcd(), spec.HintPrimaryKey(), h, 2); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err = runHints(ctx, &out, flags); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !regexp.MustCompile(`"log":\s+"recovery/orders/orders-0"`).MatchString(got) || !strings.Contains(got, "# generation 1: none") {
		t.Fatalf("with one generation of hints, printed:\n%s", got)
	}

	flags.shard = "missing"
	if err = runHints(ctx, &out, flags); err == nil || !strings.Contains(err.Error(), "shard missing: no spec at "+prefix) {
		t.Fatalf("hints of a missing shard: %v", err)
	}
}
