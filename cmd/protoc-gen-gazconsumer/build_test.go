package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/pluginpb"

	"github.com/gazconsumer/gazconsumer/cmd/protoc-gen-gazconsumer/internal/gengc"
)

// writeModule writes a Go module example.test/golden into dir holding the
// output of protoc-gen-go and protoc-gen-gazconsumer for every golden case,
// resolving github.com/gazconsumer/gazconsumer to this repository and every
// other dependency to the versions of this repository's go.mod.
func writeModule(t *testing.T, dir string) {
	t.Helper()
	gomod, gosum := moduleFiles(t, "example.test/golden")
	write := func(name string, content []byte) {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", gomod)
	write("go.sum", gosum)

	const prefix = "example.test/golden/"
	for _, gc := range goldenCases {
		req := compile(t, "testdata/protos", gc.files)
		ours := runPluginOpts(req, gengc.Options{ScaffoldDir: filepath.Join(dir, "scaffold"), ScaffoldMainDir: filepath.Join(dir, "cmd")})
		if ours.Error != nil {
			t.Fatalf("%s: %s", gc.name, ours.GetError())
		}
		for _, resp := range []*pluginpb.CodeGeneratorResponse{runProtocGenGo(t, req), ours} {
			for _, f := range resp.File {
				name := f.GetName()
				if len(name) < len(prefix) || name[:len(prefix)] != prefix {
					t.Fatalf("generated file %s is outside %s", name, prefix)
				}
				write(name[len(prefix):], []byte(f.GetContent()))
			}
		}
	}
	// Behaviour tests, by the package they test.
	for _, b := range []struct{ name, dir string }{
		{"acme_test.go", "acme/v1"}, {"e2e_test.go", "acme/v1"}, {"unfilled_test.go", "acme/v1"},
		{"harness_test.go", "acme/v1"}, {"member_timers_test.go", "acme/v1"}, {"watcher_test.go", "edition/v1"}, {"opaque_test.go", "opaque/v1"},
		{"clash_test.go", "clash/runtime"}, {"queries_test.go", "queries/v1"}, {"ownership_test.go", "ownership/v1"},
	} {
		src, err := os.ReadFile(filepath.Join("testdata", "behaviour", b.name))
		if err != nil {
			t.Fatal(err)
		}
		write(b.dir+"/"+b.name, src)
	}
}

// TestBuildGoldens builds, vets and tests the generated packages, with tests
// exercising the generated tables, framing, NewMessage, adapter and
// publisher mapping, one publishing through a generated consumer to real
// brokers and reading back with gazctl, and tests of consumers through
// their generated test harnesses.
func TestBuildGoldens(t *testing.T) {
	if testing.Short() {
		t.Skip("builds generated packages")
	}
	gazctl, err := filepath.Abs("../../.tools/bin/gazctl")
	if err != nil {
		t.Fatal(err)
	} else if _, err := os.Stat(gazctl); err != nil {
		t.Fatalf("gazctl is not installed (run scripts/setup.sh): %v", err)
	}
	dir := t.TempDir()
	writeModule(t, dir)
	for _, args := range [][]string{{"vet", "./..."}, {"test", "-count=1", "-v", "./..."}} {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off", "GAZCTL="+gazctl)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
		t.Logf("go %v:\n%s", args, out)
	}

	// A handler type missing the method of an rpc does not build, and the
	// compiler names the method.
	missing := `package missing

import acmev1 "example.test/golden/acme/v1"

// Handler has FinalizeTxn, but no OnOrder.
type Handler struct{}

func (Handler) FinalizeTxn(*acmev1.SpendCounterTxn) error { return nil }

var _ acmev1.SpendCounterHandler = Handler{}
`
	if err := os.MkdirAll(filepath.Join(dir, "missing"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "missing", "handler.go"), []byte(missing), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "./missing")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatal("a handler without OnOrder built")
	} else if !strings.Contains(string(out), "missing method OnOrder") {
		t.Fatalf("building a handler without OnOrder failed without naming it: %v\n%s", err, out)
	}
}
