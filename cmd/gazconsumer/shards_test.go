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
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	"go.gazette.dev/core/allocator"
	"go.gazette.dev/core/broker/client"
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

func TestShardsRecoveryReportsAndPrunes(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
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
	var flags = recoveryFlags{
		hintsFlags: hintsFlags{etcd: stack.EtcdURL(), prefix: prefix, shard: "00"},
		broker:     string(stack.Brokers()[0].Endpoint()),
		fileRoot:   stack.FragmentsRoot(),
	}
	// A store's directory, recorded: an old file stays live while others
	// come and go, then the log is compacted.
	var dir = t.TempDir()
	var p = recoverylog.NewPlayer(stack.Journals(), spec.RecoveryLog(), dir, 0xA1)
	p.FinishAtWriteHead()
	var fsm, err = p.Play(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := recoverylog.NewRecorder(spec.RecoveryLog(), fsm, 0xA1, dir, client.NewAppendService(ctx, stack.Journals()))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer // The log is ready: it's fenced.
	if err = runRecovery(ctx, &out, flags); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(out.String(), "none stored") {
		t.Fatalf("without hints, printed:\n%s", &out)
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
			err = recoverylog.StoreHints(ctx, stack.Etcd(), spec.HintPrimaryKey(), h, 2)
		}
		if err != nil {
			t.Fatal(err)
		}
	}

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
