package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
)

// breakingCases holds the before/after pairs of package schemacheck's
// tests, as an absolute path: the tests change directory.
var breakingCases = func() string {
	p, err := filepath.Abs("../../schemacheck/testdata/cases")
	if err != nil {
		panic(err)
	}
	return p
}()

// runBreakingCmd runs `gazconsumer breaking args...` in the working
// directory, returning its output and error.
func runBreakingCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRootCmd()
	root.SetArgs(append([]string{"breaking"}, args...))
	root.SetOut(&out)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// caseFile returns the content of file side/shop.proto of case name.
func caseFile(t *testing.T, name, side string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(breakingCases, name, side, "shop.proto"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, path string, content []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
}

// descriptorSet compiles file, under root, into a FileDescriptorSet with its
// imports and source info, as `buf build -o` writes one.
func descriptorSet(t *testing.T, root, file string) []byte {
	t.Helper()
	compiled, err := protoload.Compile(context.Background(), protoload.Roots(root, "../../proto"), nil, file)
	if err != nil {
		t.Fatal(err)
	}
	set := protoload.Collect(compiled[0])
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBreakingAgainstDescriptorSet(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"key_fields_reordered", "consumer_lost_table", "allowed_new_table_name"} {
		writeFile(t, filepath.Join(dir, name, "prev.binpb"), descriptorSet(t, filepath.Join(breakingCases, name, "old"), "shop.proto"))
		writeFile(t, filepath.Join(dir, name, "cur.binpb"), descriptorSet(t, filepath.Join(breakingCases, name, "new"), "shop.proto"))
		writeFile(t, filepath.Join(dir, name, "proto", "shop.proto"), caseFile(t, name, "new"))
	}
	t.Chdir(dir)

	// A new definition's position is in the current .proto file.
	out, err := runBreakingCmd(t, "--against", "key_fields_reordered/prev.binpb", "key_fields_reordered/proto")
	if err == nil || err.Error() != "1 change breaks stored state" {
		t.Errorf("error %v", err)
	}
	if want := `key_fields_reordered/proto/shop.proto:18:3: table "acme.v1.Spend": key fields reordered, making the key (account, customer_id): rows already stored are keyed by (customer_id, account)`; !strings.HasPrefix(out, want) || strings.Count(out, "\n") != 1 {
		t.Errorf("printed %q, want one line beginning %q", out, want)
	}

	// A removal's is in the previous version, named after the descriptor set.
	out, err = runBreakingCmd(t, "--against", "consumer_lost_table/prev.binpb", "-I", "consumer_lost_table/proto", "consumer_lost_table/proto/shop.proto")
	if err == nil || err.Error() != "1 change breaks stored state" {
		t.Errorf("error %v", err)
	}
	if want := `consumer_lost_table/prev.binpb:shop.proto:33:3: consumer acme.v1.SpendCounter no longer holds table "rank" (acme.v1.Rank)`; !strings.HasPrefix(out, want) {
		t.Errorf("printed %q, want %q", out, want)
	}

	// The current version may be a descriptor set too. A new table name is
	// a note, and no failure.
	out, err = runBreakingCmd(t, "--against", "allowed_new_table_name/prev.binpb", "allowed_new_table_name/cur.binpb")
	if err != nil {
		t.Errorf("error %v", err)
	}
	if want := `shop.proto:18:3: note: table "spend_v2" (acme.v1.Spend) has a new name (was "acme.v1.Spend")`; !strings.HasPrefix(out, want) {
		t.Errorf("printed %q, want %q", out, want)
	}

	// Against itself, nothing.
	if out, err = runBreakingCmd(t, "--against", "key_fields_reordered/cur.binpb", "key_fields_reordered/proto"); err != nil || out != "" {
		t.Errorf("against itself: printed %q, error %v", out, err)
	}
	if _, err = runBreakingCmd(t, "--against", "key_fields_reordered/proto/shop.proto", "key_fields_reordered/proto"); err == nil ||
		!strings.Contains(err.Error(), "key_fields_reordered/proto/shop.proto is not a FileDescriptorSet") {
		t.Errorf("against a .proto file: %v", err)
	}
}

// gitRepo is a git repository made by a test.
type gitRepo struct {
	t   *testing.T
	dir string
}

func (r gitRepo) git(args ...string) {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = r.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// commit writes the shop.proto of side of case name, and commits it.
func (r gitRepo) commit(name, side string) {
	r.t.Helper()
	writeFile(r.t, filepath.Join(r.dir, "proto/acme/v1/shop.proto"), caseFile(r.t, name, side))
	r.git("add", ".")
	r.git("commit", "-q", "--allow-empty", "-m", name+"/"+side)
}

func TestBreakingAgainstGitRef(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	options, err := os.ReadFile("../../proto/gazconsumer/v1/options.proto")
	if err != nil {
		t.Fatal(err)
	}
	// The quick start's layout: the annotations in third_party, buf.yaml
	// naming both modules.
	r := gitRepo{t, t.TempDir()}
	r.git("init", "-q")
	writeFile(t, filepath.Join(r.dir, "buf.yaml"), []byte("version: v2\nmodules:\n  - path: proto\n  - path: third_party\n"))
	writeFile(t, filepath.Join(r.dir, "third_party/gazconsumer/v1/options.proto"), options)
	r.git("add", ".")
	r.git("commit", "-q", "-m", "options")
	t.Chdir(r.dir)

	// A file the ref lacks is all new.
	writeFile(t, "proto/acme/v1/shop.proto", caseFile(t, "key_direction_changed", "old"))
	if out, err := runBreakingCmd(t, "--against", "git:HEAD", "proto/"); err != nil || out != "" {
		t.Errorf("against a ref without the file: printed %q, error %v", out, err)
	}

	r.commit("key_direction_changed", "old")
	writeFile(t, "proto/acme/v1/shop.proto", caseFile(t, "key_direction_changed", "new"))
	out, err := runBreakingCmd(t, "--against", "git:HEAD", "proto/")
	if err == nil || err.Error() != "1 change breaks stored state" {
		t.Errorf("error %v", err)
	}
	if want := `proto/acme/v1/shop.proto:18:3: table "acme.v1.Spend": key field account changes from ascending to descending`; !strings.HasPrefix(out, want) {
		t.Errorf("printed %q, want %q", out, want)
	}

	// From a subdirectory, with import roots of its own; a removal is at
	// its position at the ref.
	r.commit("consumer_lost_source", "old")
	writeFile(t, "proto/acme/v1/shop.proto", caseFile(t, "consumer_lost_source", "new"))
	t.Chdir("proto")
	out, err = runBreakingCmd(t, "--against", "git:HEAD", "-I", ".", "-I", "../third_party", "acme")
	if err == nil || err.Error() != "1 change breaks stored state" {
		t.Errorf("error %v", err)
	}
	if want := `HEAD:acme/v1/shop.proto:41:3: consumer acme.v1.SpendCounter no longer consumes acme.v1.Refund (rpc OnRefund)`; !strings.HasPrefix(out, want) {
		t.Errorf("printed %q, want %q", out, want)
	}
	t.Chdir("..")

	// An input that doesn't compile is named at its position, now and at the ref.
	writeFile(t, "proto/acme/v1/shop.proto", bytes.Replace(caseFile(t, "allowed_identical", "new"), []byte("int32 account"), []byte("int33 account"), 1))
	if _, err = runBreakingCmd(t, "--against", "git:HEAD", "proto/"); err == nil ||
		err.Error() != "proto/acme/v1/shop.proto:20:3: field acme.v1.Spend.account: unknown type int33" {
		t.Errorf("a current file that doesn't compile: %v", err)
	}
	writeFile(t, "proto/acme/v1/shop.proto", bytes.Replace(caseFile(t, "allowed_identical", "new"), []byte(`import "google/protobuf/empty.proto";`), []byte(`import "acme/v1/missing.proto";`), 1))
	if _, err = runBreakingCmd(t, "--against", "git:HEAD", "proto/"); err == nil ||
		err.Error() != "proto/acme/v1/shop.proto:6:8: acme/v1/missing.proto is in no import root (proto, third_party): file does not exist" {
		t.Errorf("a current file with a missing import: %v", err)
	}
	writeFile(t, "proto/acme/v1/shop.proto", bytes.Replace(caseFile(t, "allowed_identical", "new"), []byte("int32 account"), []byte("int33 account"), 1))
	r.git("add", ".")
	r.git("commit", "-q", "-m", "broken")
	writeFile(t, "proto/acme/v1/shop.proto", caseFile(t, "allowed_identical", "new"))
	if _, err = runBreakingCmd(t, "--against", "git:HEAD", "proto/"); err == nil ||
		err.Error() != "HEAD:proto/acme/v1/shop.proto:20:3: field acme.v1.Spend.account: unknown type int33" {
		t.Errorf("a file at the ref that doesn't compile: %v", err)
	}
	if _, err = runBreakingCmd(t, "--against", "git:no-such-branch", "proto/"); err == nil ||
		!strings.HasPrefix(err.Error(), "git:no-such-branch is not a commit") {
		t.Errorf("against a missing ref: %v", err)
	}
}
