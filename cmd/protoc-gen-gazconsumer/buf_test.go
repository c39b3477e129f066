package main

import (
	"bytes"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// bufPath returns the path of the buf binary installed by scripts/setup.sh.
func bufPath(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs("../../.tools/bin/buf")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("buf is not installed (run scripts/setup.sh): %v", err)
	}
	return path
}

// run runs name with args in dir, failing t with its output on error. It
// resolves modules as the user's go command does (the module proxy where the
// module cache lacks one), never relying on what earlier builds downloaded. In this repository (dir "../..") go.mod is read-only; in temporary
// modules, the go command may complete go.mod and go.sum.
func run(t *testing.T, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if dir == "../.." {
		cmd.Env = append(cmd.Env, "GOFLAGS=-mod=readonly")
	} else {
		cmd.Env = append(cmd.Env, "GOFLAGS=-mod=mod")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v in %s: %v\n%s", name, args, dir, err, out)
	}
	return out
}

// TestBufGenerateClean checks that `buf generate` with the repository's
// buf.gen.yaml reproduces every committed generated file, the example's
// included.
func TestBufGenerateClean(t *testing.T) {
	if testing.Short() {
		t.Skip("runs buf")
	}
	buf := bufPath(t)
	out := t.TempDir()
	run(t, "../..", buf, "generate", "-o", out)
	n := 0
	generated := map[string]bool{}
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, path)
		generated[filepath.ToSlash(rel)] = true
		got, _ := os.ReadFile(path)
		committed, err := os.ReadFile(filepath.Join("../..", rel))
		if err != nil {
			t.Errorf("buf generated %s, which is not committed: %v", rel, err)
		} else if !bytes.Equal(got, committed) {
			t.Errorf("buf generate changes committed %s: regenerate it with `buf generate`", rel)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Error("buf generated nothing")
	}
	for _, want := range []string{"proto/gazconsumer/v1/options.pb.go", "example/gen/bank/v1/bank.pb.go",
		"example/gen/bank/v1/bank_gazconsumer.pb.go", "example/gen/bank/v1/ledger_gazconsumer.pb.go",
		"example/gen/bank/v1/leaderboard_gazconsumer.pb.go"} {
		if !generated[want] {
			t.Errorf("buf generate did not generate %s", want)
		}
	}
}

const freshProto = `syntax = "proto3";

package fresh.v1;

import "gazconsumer/v1/options.proto";
import "google/protobuf/empty.proto";

option go_package = "example.test/fresh/gen/fresh/v1;freshv1";

message Click {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid", partition_key: ["page"]};
  bytes uuid = 1;
  string page = 2;
}

message PageViews {
  option (gazconsumer.v1.message).table = {key: [{field: "page"}]};
  string page = 1;
  int64 views = 2;
}

service ViewCounter {
  option (gazconsumer.v1.consumer) = {tables: ["PageViews"], publishes: [{message: "Click"}]};
  rpc OnClick(Click) returns (google.protobuf.Empty);
}
`

// TestFreshProto takes a fresh annotated .proto through `buf generate`,
// with the plugin writing handler stubs, and vets and builds the result.
func TestFreshProto(t *testing.T) {
	if testing.Short() {
		t.Skip("runs buf and builds")
	}
	buf := bufPath(t)
	dir := t.TempDir()
	writeModule(t, dir) // A module with this repository's dependencies.
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gomod = bytes.Replace(gomod, []byte("module example.test/golden"), []byte("module example.test/fresh"), 1)
	options, err := os.ReadFile("../../proto/gazconsumer/v1/options.proto")
	if err != nil {
		t.Fatal(err)
	}
	repo, _ := filepath.Abs("../..")
	files := map[string]string{
		"go.mod":                            string(gomod),
		"proto/fresh/v1/fresh.proto":        freshProto,
		"deps/gazconsumer/v1/options.proto": string(options),
		"buf.yaml":                          "version: v2\nmodules:\n  - path: proto\n  - path: deps\n",
		"buf.gen.yaml": "version: v2\nplugins:\n" +
			"  - local: " + filepath.Join(repo, ".tools/bin/protoc-gen-go") + "\n    out: gen\n    opt: paths=import,module=example.test/fresh/gen\n" +
			"  - local: " + filepath.Join(dir, "protoc-gen-gazconsumer") + "\n    out: gen\n    opt: [paths=import, module=example.test/fresh/gen, scaffold=handlers, scaffold_main=cmd]\n",
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Only the golden packages' go.sum and go.mod are wanted from writeModule.
	dirs := []string{"scaffold", "cmd"}
	for _, gc := range goldenCases {
		dirs = append(dirs, gc.name)
	}
	for _, d := range dirs {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "../..", "go", "build", "-o", filepath.Join(dir, "protoc-gen-gazconsumer"), "./cmd/protoc-gen-gazconsumer")
	run(t, dir, buf, "generate", "--path", "proto/fresh")
	for _, want := range []string{"gen/fresh/v1/fresh.pb.go", "gen/fresh/v1/fresh_gazconsumer.pb.go", "handlers/viewcounter/handlers.go", "cmd/viewcounter/main.go"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("buf generate did not write %s: %v", want, err)
		}
	}
	run(t, dir, "go", "vet", "./...")
	run(t, dir, "go", "build", "./...")
}

// TestBufScaffoldClash runs buf over two directories of .proto files, each
// declaring a consumer Auditor (a.v1.Auditor, b.v1.Auditor) scaffolded
// into one directory: buf runs the plugin once per directory, so that no
// run sees both. A later run, or one alongside, fails naming both, at the
// consumer it refuses; the scaffold of the other is left whole.
func TestBufScaffoldClash(t *testing.T) {
	if testing.Short() {
		t.Skip("runs buf")
	}
	buf := bufPath(t)
	dir := t.TempDir()
	run(t, "../..", "go", "build", "-o", filepath.Join(dir, "protoc-gen-gazconsumer"), "./cmd/protoc-gen-gazconsumer")
	options, err := os.ReadFile("../../proto/gazconsumer/v1/options.proto")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":                            "module example.test/golden\n",
		"deps/gazconsumer/v1/options.proto": string(options),
		"buf.yaml":                          "version: v2\nmodules:\n  - path: proto\n  - path: deps\n",
		"buf.gen.yaml": "version: v2\nplugins:\n  - local: " + filepath.Join(dir, "protoc-gen-gazconsumer") +
			"\n    out: gen\n    opt: [paths=import, module=example.test/golden, scaffold=internal, scaffold_main=cmd]\n",
	}
	for _, pkg := range []string{"a", "b"} {
		files["proto/"+pkg+"/v1/auditor.proto"] = strings.ReplaceAll(auditorProto, "PKG", pkg)
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// generate runs buf generate with args, and returns its output, which must
	// be a failure if fail.
	generate := func(fail bool, args ...string) string {
		t.Helper()
		cmd := exec.Command(buf, append([]string{"generate"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if (err != nil) != fail {
			t.Fatalf("buf generate %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	// scaffolds returns the consumer whose scaffolds both files are, or "".
	scaffolds := func() string {
		t.Helper()
		var owners []string
		for _, path := range []string{"internal/auditor/handlers.go", "cmd/auditor/main.go"} {
			src, err := os.ReadFile(filepath.Join(dir, path))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := parser.ParseFile(token.NewFileSet(), path, src, 0); err != nil {
				t.Fatalf("%s is not whole: %v\n%s", path, err, src)
			}
			m := regexp.MustCompile(`^// Scaffold of consumer (\S+), written once`).FindSubmatch(src)
			if m == nil {
				t.Fatalf("%s has no marker:\n%s", path, src)
			}
			owners = append(owners, string(m[1]))
		}
		if owners[0] != owners[1] {
			t.Fatalf("the handlers are those of %s, the command that of %s", owners[0], owners[1])
		}
		return owners[0]
	}
	refused := func(out, refused, holder string) {
		t.Helper()
		want := refused + "/v1/auditor.proto:16:1: the handlers of consumer " + refused + ".v1.Auditor would be scaffolded as " +
			filepath.Join("internal", "auditor", "handlers.go") + ", which already holds the handlers of consumer " + holder + ".v1.Auditor; "
		if !strings.Contains(out, want) {
			t.Fatalf("buf generate's output does not say\n%s\nbut\n%s", want, out)
		}
	}

	// Run by run.
	generate(false, "--path", "proto/a")
	if got := scaffolds(); got != "a.v1.Auditor" {
		t.Fatalf("scaffolded %s, want a.v1.Auditor", got)
	}
	refused(generate(true, "--path", "proto/b"), "b", "a")
	refused(generate(true), "b", "a")
	generate(false, "--path", "proto/a")
	if got := scaffolds(); got != "a.v1.Auditor" {
		t.Fatalf("scaffolds are %s's, want a.v1.Auditor's", got)
	}

	// Both directories in one buf generate, from scratch.
	for _, d := range []string{"internal", "cmd", "gen"} {
		if err := os.RemoveAll(filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	out := generate(true)
	switch winner := scaffolds(); winner {
	case "a.v1.Auditor":
		refused(out, "b", "a")
	case "b.v1.Auditor":
		refused(out, "a", "b")
	default:
		t.Fatalf("scaffolds are %s's", winner)
	}
}
