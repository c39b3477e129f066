package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
	"github.com/gazconsumer/gazconsumer/specgen"
	"google.golang.org/protobuf/proto"
)

// runSpecsCmd runs `gazconsumer specs args...`, returning its stdout.
func runSpecsCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var root = newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs(append([]string{"specs"}, args...))
	var err = root.ExecuteContext(context.Background())
	return out.String(), err
}

// specBody returns a spec file's YAML without its header comment, which
// names the command that generated it.
func specBody(t *testing.T, content string) string {
	t.Helper()
	var lines = strings.Split(content, "\n")
	var i = 0
	for i < len(lines) && strings.HasPrefix(lines[i], "#") {
		i++
	}
	if i == 0 {
		t.Errorf("no header comment:\n%s", content)
	}
	return strings.Join(lines[i:], "\n")
}

// exampleSpec returns the body of example/specs/name.
func exampleSpec(t *testing.T, name string) string {
	t.Helper()
	var b, err = os.ReadFile(filepath.Join("../../example/specs", name))
	if err != nil {
		t.Fatal(err)
	}
	return specBody(t, string(b))
}

var exampleSpecs = []string{"journals.yaml", "leaderboard-shards.yaml", "ledger-shards.yaml"}

func TestSpecsOut(t *testing.T) {
	var dir = filepath.Join(t.TempDir(), "specs")
	if _, err := runSpecsCmd(t, "--out", dir, "../../example/proto"); err != nil {
		t.Fatal(err)
	}
	var written, _ = filepath.Glob(filepath.Join(dir, "*"))
	if len(written) != len(exampleSpecs) {
		t.Errorf("wrote %v, not %v", written, exampleSpecs)
	}
	for _, name := range exampleSpecs {
		var b, err = os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Error(err)
			continue
		}
		if want := "# Regenerate with: gazconsumer specs --out " + dir + " ../../example/proto\n"; !strings.Contains(string(b), want) {
			t.Errorf("%s does not say %q:\n%s", name, want, b)
		}
		if got := specBody(t, string(b)); got != exampleSpec(t, name) {
			t.Errorf("%s is\n%s\nnot as in example/specs:\n%s", name, got, exampleSpec(t, name))
		}
	}
}

func TestSpecsStdout(t *testing.T) {
	// A directory and a file, under an import path of their own.
	var out, err = runSpecsCmd(t, "-I", "../../example/proto",
		"../../example/proto/gazconsumer/example/bank/v1/ledger.proto",
		"../../example/proto/gazconsumer/example/bank/v1")
	if err != nil {
		t.Fatal(err)
	}
	var docs = strings.Split(out, "---\n")
	if len(docs) != len(exampleSpecs) {
		t.Fatalf("printed %d documents, not %d:\n%s", len(docs), len(exampleSpecs), out)
	}
	for i, name := range exampleSpecs {
		if got := specBody(t, docs[i]); got != exampleSpec(t, name) {
			t.Errorf("document %d is\n%s\nnot %s:\n%s", i, got, name, exampleSpec(t, name))
		}
	}
}

func TestSpecsDescriptorSet(t *testing.T) {
	var files, err = specgen.Compile(context.Background(), []string{"../../example/proto"},
		[]string{"gazconsumer/example/bank/v1/ledger.proto", "gazconsumer/example/bank/v1/leaderboard.proto"})
	if err != nil {
		t.Fatal(err)
	}
	// As buf build writes it: the files and their imports, the options
	// encoded in them.
	var set = protoload.Collect(files...)
	data, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	var path = filepath.Join(t.TempDir(), "bank.binpb")
	if err = os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runSpecsCmd(t, "--descriptor-set", path)
	if err != nil {
		t.Fatal(err)
	}
	var docs = strings.Split(out, "---\n")
	if len(docs) != len(exampleSpecs) {
		t.Fatalf("printed %d documents, not %d:\n%s", len(docs), len(exampleSpecs), out)
	}
	for i, name := range exampleSpecs {
		if got := specBody(t, docs[i]); got != exampleSpec(t, name) {
			t.Errorf("document %d is\n%s\nnot %s:\n%s", i, got, name, exampleSpec(t, name))
		}
	}
}

func TestSpecsErrors(t *testing.T) {
	var dir = t.TempDir()
	var bad = filepath.Join(dir, "bad.proto")
	var src = `syntax = "proto3";
package bad.v1;
import "gazconsumer/v1/options.proto";
message M {
  option (gazconsumer.v1.message).journal = {
    uuid_field: "uuid"
    family: {name: "bad/m", partitions: 2}
  };
  bytes uuid = 1;
}
`
	if err := os.WriteFile(bad, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no .proto files or directories given"},
		{[]string{"--descriptor-set", "x.binpb", "../../example/proto"}, "either PATHs or --descriptor-set"},
		{[]string{"-I", dir, "../../example/proto"}, "is under none of the import paths"},
		{[]string{bad}, `bad.proto:5:3: journal family of bad.v1.M: name "bad/m" must end in "/"`},
		{[]string{"--descriptor-set", filepath.Join(dir, "missing.binpb")}, "missing.binpb: no such file"},
	} {
		var _, err = runSpecsCmd(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("specs %v: error %v, want one saying %q", tc.args, err, tc.want)
		}
	}
}
