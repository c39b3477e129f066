package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/specgen"
)

// bankProtos copies the example's .proto files into a directory, with each
// of edits (old, new) made to the file of the name it begins with, and
// returns it.
func bankProtos(t *testing.T, edits ...[3]string) string {
	t.Helper()
	var dir = t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../example/proto")); err != nil {
		t.Fatal(err)
	}
	for _, e := range edits {
		var path = filepath.Join(dir, "gazconsumer/example/bank/v1", e[0])
		var b, err = os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var edited = strings.ReplaceAll(string(b), e[1], e[2])
		if edited == string(b) {
			t.Fatalf("%s has no %q", e[0], e[1])
		}
		if err = os.WriteFile(path, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// plan resolves the rescale of consumers of the protos of dir.
func plan(t *testing.T, dir string, f rescaleFlags) ([]*rescaleConsumer, []*rescaleFamily, error) {
	t.Helper()
	var files, err = loadProtos(context.Background(), nil, "", []string{dir})
	if err != nil {
		t.Fatal(err)
	}
	specs, err := specgen.Build(files)
	if err != nil {
		t.Fatal(err)
	}
	return rescalePlan(files, specs, f)
}

var grow = [3]string{"bank.proto", "partitions: 2", "partitions: 4"}

// The plan of a rescale: the consumers named and the families they read;
// what it refuses, and why.
func TestRescalePlan(t *testing.T) {
	var dir = bankProtos(t, grow)
	var consumers, families, err = plan(t, dir, rescaleFlags{consumers: []string{"Ledger", "gazconsumer.example.bank.v1.Leaderboard=/gc/board"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(consumers) != 2 || consumers[0].prefix != "/gazette/consumers/ledger" || consumers[1].prefix != "/gc/board" || consumers[0].to != 4 {
		t.Fatalf("consumers %+v", consumers)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.name)
	}
	if got := strings.Join(names, " "); got != "gazconsumer.example.bank.v1.BalanceChanged gazconsumer.example.bank.v1.Order gazconsumer.example.bank.v1.Payment" {
		t.Fatalf("families %s", got)
	}

	for _, tc := range []struct {
		name  string
		dir   string
		flags rescaleFlags
		want  string
	}{
		{"unknown consumer", dir, rescaleFlags{consumers: []string{"Nope"}},
			"--consumer Nope: no consumer with shards of that name (have: gazconsumer.example.bank.v1.Leaderboard, gazconsumer.example.bank.v1.Ledger)"},
		{"the .proto says otherwise", dir, rescaleFlags{consumers: []string{"Ledger"}, partitions: 6},
			"--partitions 6, but the .proto files give family gazconsumer.example.bank.v1.Order 4 partitions"},
		{"a table without the partition key", bankProtos(t, grow,
			[3]string{"ledger.proto", `key: [{field: "customer_id"}]`, `key: [{field: "orders"}]`},
			[3]string{"ledger.proto", "rescalable: true", "rescalable: false"}),
			rescaleFlags{consumers: []string{"Ledger"}},
			"consumer gazconsumer.example.bank.v1.Ledger can't be rescaled: gazconsumer/example/bank/v1/ledger.proto:"},
		{"a timer without the partition key", bankProtos(t, append(nag("order_id"), grow,
			[3]string{"ledger.proto", "rescalable: true", "rescalable: false\n    timers: [\"Nag\"]"})...),
			rescaleFlags{consumers: []string{"Ledger"}},
			"consumer gazconsumer.example.bank.v1.Ledger can't be rescaled: gazconsumer/example/bank/v1/ledger.proto:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var _, _, err = plan(t, tc.dir, tc.flags)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// nag returns the edits of ledger.proto adding timer Nag, keyed by key (a
// field of it, as order_id or customer_id), and its rpc: the consumer's
// option timers is left to add.
func nag(key string) [][3]string {
	return [][3]string{
		{"ledger.proto", "// GetBalanceRequest asks for", "// Nag nags.\nmessage Nag {\n  option (gazconsumer.v1.message).timer = {key: [{field: \"" + key +
			"\"}]};\n  string order_id = 1;\n  string customer_id = 2;\n}\n\n// GetBalanceRequest asks for"},
		{"ledger.proto", "  // OnOrder charges", "  rpc OnNag(Nag) returns (google.protobuf.Empty);\n  // OnOrder charges"},
	}
}

// Rows that expire and timers keyed by the partition key follow their keys
// through a rescale: their consumer can be rescaled.
func TestRescaleTimers(t *testing.T) {
	var dir = bankProtos(t, slices.Concat([][3]string{grow,
		{"ledger.proto", `key: [{field: "customer_id"}]`, `key: [{field: "customer_id"}], ttl: "720h"`},
		{"ledger.proto", "rescalable: true", "rescalable: true\n    timers: [\"Nag\"]"}}, nag("customer_id"))...)
	if _, _, err := plan(t, dir, rescaleFlags{consumers: []string{"Ledger", "Leaderboard"}}); err != nil {
		t.Fatal(err)
	}
}

// A consumer's shards and families must be those of a rescale to a
// multiple of today's count.
func TestRescaleCheck(t *testing.T) {
	var consumers, families, err = plan(t, bankProtos(t, grow), rescaleFlags{consumers: []string{"Ledger"}})
	if err != nil {
		t.Fatal(err)
	}
	var c = consumers[0]
	var live = func(n int, labels ...string) {
		c.live, c.from = map[pc.ShardID]liveSpec{}, 0
		for i := range n {
			var spec = &pc.ShardSpec{Id: c.specs.Shards[i].Id}
			for j := 0; j+1 < len(labels); j += 2 {
				spec.LabelSet.AddValue(labels[j], labels[j+1])
			}
			c.live[spec.Id] = liveSpec{spec: spec}
			c.from++
		}
		for _, fam := range families {
			fam.live = map[pb.Journal]bool{}
			for i := range n {
				fam.live[fam.journals[i].Name] = true
			}
		}
	}
	live(2)
	if err = c.check(families); err != nil {
		t.Fatalf("2 to 4: %v", err)
	}
	live(3)
	if err = c.check(families); err == nil || !strings.Contains(err.Error(), "4 partitions is not a multiple of its 3 shards") {
		t.Errorf("3 to 4: %v", err)
	}
	live(2, runtime.LabelSplitTo, "8")
	if err = c.check(families); err == nil || !strings.Contains(err.Error(), "is being rescaled to 8 partitions: finish that rescale first") {
		t.Errorf("during another rescale: %v", err)
	}
	live(4)
	c.to = 2
	if err = c.check(families); err == nil || !strings.Contains(err.Error(), "shrinking is not supported") {
		t.Errorf("4 to 2: %v", err)
	}
}
