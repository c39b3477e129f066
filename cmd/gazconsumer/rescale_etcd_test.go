package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
)

// The rescale's writes on a stack: shard specs in transactions of up to
// maxSpecPuts, each writing none of its specs if one changed; journals
// listed at once and created if missing.
func TestRescaleWritesSpecsAndJournals(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stack = devstacktest.StartT(t, "")
	var etcd = stack.Etcd()
	const prefix = "/test/items/"

	var spec = func(i int) *pc.ShardSpec {
		return &pc.ShardSpec{
			Id: pc.ShardID(fmt.Sprintf("shard-%03d", i)), RecoveryLogPrefix: "recovery", HintPrefix: "/hints",
			MaxTxnDuration: time.Second, Sources: []pc.ShardSpec_Source{{Journal: "a/journal"}},
		}
	}
	// More than two transactions' worth, the last one short.
	var n = 2*maxSpecPuts + 3
	var puts []specPut
	for i := range n {
		puts = append(puts, specPut{key: prefix + spec(i).Id.String(), spec: spec(i)})
	}
	if err := putSpecs(ctx, etcd, puts); err != nil {
		t.Fatal(err)
	}
	var resp, err = etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	} else if len(resp.Kvs) != n {
		t.Fatalf("%d specs written of %d", len(resp.Kvs), n)
	}
	var rev = map[string]int64{}
	for _, kv := range resp.Kvs {
		rev[string(kv.Key)] = kv.ModRevision
	}

	// A transaction one of whose specs changed writes none of them: a new
	// shard beside one that exists (expected absent), and an update of an
	// existing one beside a stale revision.
	var fresh = spec(n)
	for _, bad := range [][]specPut{
		{{key: prefix + fresh.Id.String(), spec: fresh}, {key: puts[0].key, spec: spec(0)}},
		{{key: puts[1].key, rev: rev[puts[1].key], spec: spec(1)}, {key: puts[2].key, rev: rev[puts[2].key] - 1, spec: spec(2)}},
	} {
		err = putSpecs(ctx, etcd, bad)
		if err == nil || !strings.Contains(err.Error(), "a spec changed meanwhile") || !strings.Contains(err.Error(), string(bad[1].spec.Id)) {
			t.Fatalf("a stale put: %v", err)
		}
	}
	if resp, err = etcd.Get(ctx, prefix, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if kv.ModRevision != rev[string(kv.Key)] {
			t.Fatalf("%s written by a failed transaction", kv.Key)
		}
	}
	if len(resp.Kvs) != n {
		t.Fatalf("%d specs after failed transactions, want %d", len(resp.Kvs), n)
	}
	// An invalid spec is refused before anything is written.
	var invalid = spec(n + 1)
	invalid.MaxTxnDuration = 0
	if err = putSpecs(ctx, etcd, []specPut{{key: prefix + invalid.Id.String(), spec: invalid}}); err == nil || !strings.Contains(err.Error(), string(invalid.Id)) {
		t.Fatalf("an invalid spec: %v", err)
	}

	// Journals: listed at once, the missing created.
	var dir = stack.Name("rescale")
	var journal = func(name string) pb.JournalSpec {
		return pb.JournalSpec{
			Name: pb.Journal(dir + "/" + name), Replication: 1,
			Fragment: pb.JournalSpec_Fragment{Length: 1 << 20, CompressionCodec: pb.CompressionCodec_NONE, RefreshInterval: time.Minute},
		}
	}
	var specs = []pb.JournalSpec{journal("a"), journal("b"), journal("c")}
	missing, err := missingJournals(ctx, stack.Journals(), specs)
	if err != nil {
		t.Fatal(err)
	} else if len(missing) != 3 {
		t.Fatalf("missing %v, want all three", journalNames(missing))
	}
	if err = createJournals(ctx, stack.Journals(), missing[:2]); err != nil {
		t.Fatal(err)
	}
	if missing, err = missingJournals(ctx, stack.Journals(), specs); err != nil {
		t.Fatal(err)
	} else if got := journalNames(missing); got != specs[2].Name.String() {
		t.Fatalf("missing %q, want %s", got, specs[2].Name)
	}
	// Created meanwhile: the creation fails, naming them.
	if err = createJournals(ctx, stack.Journals(), specs[1:]); err == nil || !strings.Contains(err.Error(), specs[1].Name.String()) {
		t.Fatalf("creating an existing journal: %v", err)
	}
	if missing, err = missingJournals(ctx, stack.Journals(), specs); err != nil {
		t.Fatal(err)
	} else if !slices.EqualFunc(missing, specs[2:], func(a, b pb.JournalSpec) bool { return a.Name == b.Name }) {
		t.Fatalf("missing %q after a failed creation, want %s", journalNames(missing), specs[2].Name)
	}
}
