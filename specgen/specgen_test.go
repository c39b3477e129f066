package specgen_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	"github.com/gazconsumer/gazconsumer/specgen"
	"github.com/gazconsumer/gazconsumer/specs"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/consumer/shardspace"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"gopkg.in/yaml.v2"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// protoFiles returns the .proto files under root, relative to it.
func protoFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	var err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".proto") {
			var rel, _ = filepath.Rel(root, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no .proto files under %s: %v", root, err)
	}
	return files
}

func compile(t *testing.T, root string, files []string) []protoreflect.FileDescriptor {
	t.Helper()
	var fds, err = specgen.Compile(context.Background(), []string{root}, files)
	if err != nil {
		t.Fatal(err)
	}
	return fds
}

// checkGolden compares generated files with the YAML files of dir, which
// must be exactly those (or rewrites them with -update).
func checkGolden(t *testing.T, dir string, got []specgen.File) {
	t.Helper()
	var names []string
	for _, f := range got {
		names = append(names, f.Name)
		var path = filepath.Join(dir, f.Name)
		if *update {
			if err := os.WriteFile(path, f.Content, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		var want, err = os.ReadFile(path)
		if err != nil {
			t.Errorf("generated %s: %v", f.Name, err)
		} else if !bytes.Equal(f.Content, want) {
			t.Errorf("generated %s differs from %s (go test ./specgen -update rewrites it):\n%s", f.Name, path, f.Content)
		}
	}
	var existing, _ = filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, path := range existing {
		if !slices.Contains(names, filepath.Base(path)) {
			t.Errorf("%s is not generated", path)
		}
	}
}

// checkApplicable parses files as gazctl does before applying them.
func checkApplicable(t *testing.T, files []specgen.File) (journals *pb.ApplyRequest, shards map[string]shardspace.Set) {
	t.Helper()
	shards = map[string]shardspace.Set{}
	for _, f := range files {
		if f.Name == specgen.JournalsFile {
			var err error
			if journals, err = specs.ParseJournals(f.Name, f.Content); err != nil {
				t.Error(err)
			}
			continue
		}
		var set shardspace.Set
		if err := yaml.UnmarshalStrict(f.Content, &set); err != nil {
			t.Errorf("%s: %v", f.Name, err)
			continue
		}
		set.PushDown()
		for _, s := range set.Shards {
			if err := s.Spec.Validate(); err != nil {
				t.Errorf("%s: shard %s: %v", f.Name, s.Spec.Id, err)
			}
		}
		shards[f.Name] = set
	}
	return journals, shards
}

// TestExample checks that example/specs are the specs of the example's
// annotations, and that gazctl takes them.
func TestExample(t *testing.T) {
	var root = "../example/proto"
	var got, err = specgen.Generate(compile(t, root, protoFiles(t, root)),
		specgen.Options{Command: "gazconsumer specs --out example/specs example/proto"})
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "../example/specs", got)
	var journals, shards = checkApplicable(t, got)
	if journals == nil || len(journals.Changes) != 11 {
		t.Errorf("the example has 11 journals (3 families of 2, 4 recovery logs and the ledger's dead letters), not %v", journals)
	}
	for _, name := range []string{"ledger-shards.yaml", "leaderboard-shards.yaml"} {
		if n := len(shards[name].Shards); n != 2 {
			t.Errorf("%s has %d shards, not 2", name, n)
		}
	}
	// The ledger's shards record dead letters in its journal.
	for _, s := range shards["ledger-shards.yaml"].Shards {
		if v := s.Spec.LabelSet.ValueOf(source.LabelDeadLetterJournal); v != "bank/dead-letters/ledger" {
			t.Errorf("shard %s: label %s=%q, want bank/dead-letters/ledger", s.Spec.Id, source.LabelDeadLetterJournal, v)
		}
	}
}

// TestGolden checks the specs of the generator's golden test protos, with
// family and shards annotations, compiled and from a descriptor set.
func TestGolden(t *testing.T) {
	var root = "testdata/protos"
	var fds = compile(t, root, protoFiles(t, root))
	var opts = specgen.Options{Command: "gazconsumer specs --out specgen/testdata/golden specgen/testdata/protos"}
	var got, err = specgen.Generate(fds, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "testdata/golden", got)
	checkApplicable(t, got)

	// The same files in a descriptor set, as buf build writes it.
	var set = protoload.Collect(fds...)
	data, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	fromSet, err := specgen.ReadDescriptorSet(data)
	if err != nil {
		t.Fatal(err)
	}
	fromSetGot, err := specgen.Generate(fromSet, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(fromSetGot) != len(got) {
		t.Fatalf("from a descriptor set, %d files rather than %d", len(fromSetGot), len(got))
	}
	for i := range got {
		if fromSetGot[i].Name != got[i].Name || !bytes.Equal(fromSetGot[i].Content, got[i].Content) {
			t.Errorf("from a descriptor set, %s is\n%s\nrather than %s\n%s", fromSetGot[i].Name, fromSetGot[i].Content, got[i].Name, got[i].Content)
		}
	}
}

// TestUpsert checks that Upsert gives every journal and shard revision -1.
func TestUpsert(t *testing.T) {
	var root = "../example/proto"
	var got, err = specgen.Generate(compile(t, root, protoFiles(t, root)), specgen.Options{Command: "test", Upsert: true})
	if err != nil {
		t.Fatal(err)
	}
	var journals, shards = checkApplicable(t, got)
	if journals == nil || len(journals.Changes) == 0 {
		t.Fatal("no journals")
	}
	for _, c := range journals.Changes {
		if c.ExpectModRevision != -1 || c.Upsert == nil {
			t.Errorf("journal change %v is not an upsert of revision -1", c)
		}
	}
	if len(shards) == 0 {
		t.Fatal("no shards")
	}
	for name, set := range shards {
		for _, s := range set.Shards {
			if s.Revision != -1 {
				t.Errorf("%s: shard %s has revision %d", name, s.Spec.Id, s.Revision)
			}
		}
	}
}

// TestPartitionNames checks the digits of partition and shard indices.
func TestPartitionNames(t *testing.T) {
	for _, tc := range []struct {
		partitions int
		last       string
	}{{1, "part-00"}, {10, "part-09"}, {100, "part-99"}, {101, "part-100"}} {
		var src = `syntax = "proto3";
package p.v1;
import "gazconsumer/v1/options.proto";
message M {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid", family: {name: "p/m/", partitions: ` + strconv.Itoa(tc.partitions) + `}};
  bytes uuid = 1;
}
`
		var dir = t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "m.proto"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		var got, err = specgen.Generate(compile(t, dir, []string{"m.proto"}), specgen.Options{Command: "test"})
		if err != nil {
			t.Fatal(err)
		}
		var journals, _ = checkApplicable(t, got)
		if journals == nil || len(journals.Changes) != tc.partitions {
			t.Fatalf("%d partitions: %v", tc.partitions, journals)
		}
		if last := journals.Changes[tc.partitions-1].Upsert.Name; last != pb.Journal("p/m/"+tc.last) {
			t.Errorf("the last of %d partitions is %s, not p/m/%s", tc.partitions, last, tc.last)
		}
	}
}

// TestErrors checks the error of each testdata/errors/NAME.proto with
// NAME.err.
func TestErrors(t *testing.T) {
	var files, _ = filepath.Glob("testdata/errors/*.proto")
	if len(files) == 0 {
		t.Fatal("no testdata/errors")
	}
	for _, path := range files {
		var name = filepath.Base(path)
		t.Run(strings.TrimSuffix(name, ".proto"), func(t *testing.T) {
			var _, err = specgen.Generate(compile(t, "testdata/errors", []string{name}), specgen.Options{Command: "test"})
			if err == nil {
				t.Fatal("no error")
			}
			var errFile = strings.TrimSuffix(path, ".proto") + ".err"
			if *update {
				if err := os.WriteFile(errFile, []byte(err.Error()+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			var want, rerr = os.ReadFile(errFile)
			if rerr != nil {
				t.Fatal(rerr)
			}
			if got := err.Error() + "\n"; got != string(want) {
				t.Errorf("error\n%s\nnot\n%s", got, want)
			}
		})
	}
}
