package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/internal/clientflags"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
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
	if _, err = stack.Etcd().Put(ctx, allocator.ItemKey(groupkeys.NewKeySpace(prefix), "orders-0"), spec.MarshalString()); err != nil {
		t.Fatal(err)
	}
	var flags = shardsFlags{Flags: clientflags.Flags{EtcdAddress: stack.EtcdURL(), EtcdPrefix: prefix}, shard: "orders-0"}

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

func TestShardsRecoveryReportsAndPrunes(t *testing.T) {
	// Long enough for a broker's persister to retry a fragment whose first
	// persist failed, or that completed while the broker did not yet know
	// itself its journal's primary: it queues those, and persists them on
	// its ticks, a minute apart, up to three ticks later (CI: none of 21
	// fragments was persisted within the minute this test once allowed).
	var ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stack = devstacktest.StartT(t, devstacktest.Journals("recovery", 1, 32<<10))
	var spec = &pc.ShardSpec{
		Id: "00", RecoveryLogPrefix: "recovery", HintPrefix: "/gazette/hints",
		HintBackups: 1, MaxTxnDuration: time.Second,
	}
	const prefix = "/gazette/consumers/bank"
	if _, err := stack.Etcd().Put(ctx, allocator.ItemKey(groupkeys.NewKeySpace(prefix), "00"), spec.MarshalString()); err != nil {
		t.Fatal(err)
	}
	var flags = recoveryFlags{shardsFlags: shardsFlags{
		Flags: clientflags.Flags{EtcdAddress: stack.EtcdURL(), EtcdPrefix: prefix,
			BrokerAddress: string(stack.Brokers()[0].Endpoint()), FileRoot: stack.FragmentsRoot()},
		shard: "00",
	}}
	// Once the log is assigned to a broker, which lists its fragments.
	var out bytes.Buffer
	for {
		out.Reset()
		var err = runRecovery(ctx, &out, flags)
		if err == nil {
			break
		} else if !strings.Contains(err.Error(), "INSUFFICIENT_JOURNAL_BROKERS") || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "none stored") {
		t.Fatalf("without hints, printed:\n%s", &out)
	}
	recordCompacted(t, ctx, stack.Journals(), stack.Etcd(), spec)
	var err error

	// Report, once the brokers have persisted prunable fragments. A broker
	// persists a completed fragment at once, but one whose first attempt
	// failed waits for its persister's retry, a minute or two later: those
	// are listed as not persisted yet, and pruning passes over them.
	var prunable = regexp.MustCompile(`prunable\s+(\d+) fragments`)
	var persisted = regexp.MustCompile(`(?m)^\s+\[\d+, \d+\) file:///$`)
	for {
		out.Reset()
		if err = runRecovery(ctx, &out, flags); err != nil {
			t.Fatal(err)
		}
		if m := prunable.FindStringSubmatch(out.String()); m != nil && m[1] == "21" &&
			len(persisted.FindAllString(out.String(), -1)) >= 20 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no persisted prunable fragments:\n%s", &out)
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, want := range []string{"live state", "in 2 files", "hinted segments", "needed from", "prunable        21 fragments"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, &out)
		}
	}
	flags.prune = true
	out.Reset()
	if err = runRecovery(ctx, &out, flags); err != nil {
		t.Fatal(err)
	}
	var pruned = regexp.MustCompile(`pruned (\d+) fragments`).FindStringSubmatch(out.String())
	if pruned == nil || (pruned[1] != "20" && pruned[1] != "21") {
		t.Fatalf("prune printed:\n%s", &out)
	}
	// What was pruned is gone from the store, and so from the brokers' index
	// once they next list it (each second): what's left to prune is at most
	// the one fragment not persisted yet.
	flags.prune = false
	for {
		out.Reset()
		if err = runRecovery(ctx, &out, flags); err != nil {
			t.Fatal(err)
		}
		if len(persisted.FindAllString(out.String(), -1)) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("pruned fragments are still listed:\n%s", &out)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// recordCompacted records a store's directory into the recovery log of
// spec, whose player is the first: an old file stays live while twenty
// others come and go, then the log is compacted, and two generations of
// hints are stored, both after the compaction. Most of the log's fragments
// are then prunable.
func recordCompacted(t *testing.T, ctx context.Context, jc pb.RoutedJournalClient, etcd *clientv3.Client, spec *pc.ShardSpec) {
	t.Helper()
	var dir = t.TempDir()
	var p = recoverylog.NewPlayer(jc, spec.RecoveryLog(), dir, 0xA1)
	p.FinishAtWriteHead()
	var fsm, err = p.Play(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recoverylog.NewRecorder(spec.RecoveryLog(), fsm, 0xA1, dir, client.NewAppendService(ctx, jc))
	if err != nil {
		t.Fatal(err)
	}
	var write = func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		var fn, err = rec.NewWritableFile(name)
		if err == nil {
			err = rec.Append(fn, data)
		}
		if err == nil {
			err = rec.Close(fn)
		}
		if err == nil {
			err = rec.SyncAll(ctx) // An append of its own: fragments roll between appends.
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	write("IDENTITY", []byte("old and live"))
	for i := range 20 {
		var name = fmt.Sprintf("%06d.sst", i)
		write(name, bytes.Repeat([]byte{byte(i)}, 40<<10))
		if i != 19 {
			if err = os.Remove(filepath.Join(dir, name)); err == nil {
				err = rec.Delete(name)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err = rec.Compact(ctx, recoverylog.Compaction{Ratio: 1.5}); err != nil {
		t.Fatal(err)
	}
	for range 2 { // Two generations, both after the compaction.
		var h, err = rec.Hints(ctx)
		if err == nil {
			err = recoverylog.StoreHints(ctx, etcd, spec.HintPrimaryKey(), h, 2)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Shards are selected by id or label selector, and a selection that is
// malformed, ambiguous or empty fails naming why.
func TestShardsSelection(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stack = devstacktest.StartT(t, "")
	const prefix = "/gazette/consumers/sel"
	for _, id := range []string{"a-00", "a-01", "b-00", "norec-00"} {
		var spec = &pc.ShardSpec{Id: pc.ShardID(id), RecoveryLogPrefix: "recovery", HintPrefix: "/gazette/hints",
			MaxTxnDuration: time.Second, LabelSet: pb.MustLabelSet("app", id[:strings.IndexByte(id, '-')])}
		if id == "norec-00" {
			spec.RecoveryLogPrefix, spec.HintPrefix = "", ""
		}
		if _, err := stack.Etcd().Put(ctx, allocator.ItemKey(groupkeys.NewKeySpace(prefix), id), spec.MarshalString()); err != nil {
			t.Fatal(err)
		}
	}
	var base = shardsFlags{Flags: clientflags.Flags{EtcdAddress: stack.EtcdURL(), EtcdPrefix: prefix}}
	for _, tc := range []struct {
		shard, selector string
		want            []string // Ids selected, or
		err             string   // the error.
	}{
		{shard: "b-00", want: []string{"b-00"}},
		{selector: "app=a", want: []string{"a-00", "a-01"}},
		{selector: "app in (a, b)", want: []string{"a-00", "a-01", "b-00"}},
		{selector: "id=a-01", want: []string{"a-01"}},
		{selector: "app=c", err: `no shard under ` + prefix + `/items/ matches -l "app=c"`},
		{shard: "c-00", err: "shard c-00: no spec at " + prefix + "/items/c-00"},
		{shard: "a-00", selector: "app=a", err: "--shard and -l go apart"},
		{err: "--shard or -l is required"},
		{selector: "app=(", err: `-l "app=("`},
		{selector: "app=norec", err: "shard norec-00 has no recovery log"},
	} {
		var f = base
		f.shard, f.selector = tc.shard, tc.selector
		var specs, etcd, err = f.selectShards(ctx)
		if etcd != nil {
			etcd.Close()
		}
		var got []string
		for _, s := range specs {
			got = append(got, s.Id.String())
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("--shard %q -l %q: %v, %v; want an error naming %q", tc.shard, tc.selector, got, err, tc.err)
		} else if tc.err == "" && (err != nil || strings.Join(got, ",") != strings.Join(tc.want, ",")) {
			t.Errorf("--shard %q -l %q: %v, %v; want %v", tc.shard, tc.selector, got, err, tc.want)
		}
	}
	var f = base
	f.EtcdPrefix, f.shard = "", "a-00"
	if _, _, err := f.selectShards(ctx); err == nil || !strings.Contains(err.Error(), "--etcd.prefix is required") {
		t.Errorf("without a prefix: %v", err)
	}
}
