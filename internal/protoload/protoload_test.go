package protoload_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
)

// sources is a diamond of imports: d imports b and c, which import a; and
// d uses gazconsumer's options.
var sources = map[string]string{
	"x/a.proto": `syntax = "proto3"; package x; message A {}`,
	"x/b.proto": `syntax = "proto3"; package x; import "x/a.proto"; message B { A a = 1; }`,
	"x/c.proto": `syntax = "proto3"; package x; import "x/a.proto"; import "google/protobuf/timestamp.proto"; message C { A a = 1; google.protobuf.Timestamp t = 2; }`,
	"x/d.proto": `syntax = "proto3"; package x; import "x/c.proto"; import "x/b.proto"; import "gazconsumer/v1/options.proto"; message D { B b = 1; C c = 2; }`,
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	var dir = t.TempDir()
	for name, content := range files {
		var p = filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func paths(fds []protoreflect.FileDescriptor) []string {
	var out []string
	for _, fd := range fds {
		out = append(out, fd.Path())
	}
	return out
}

// Files compile from roots or from memory, with the standard imports, and
// options.proto from the program only where it is asked for; Collect puts
// each file once, after its imports, in a deterministic order; the set
// decodes and links back.
func TestCompileCollectRead(t *testing.T) {
	var ctx = context.Background()
	var root = writeTree(t, sources)

	if _, err := protoload.Compile(ctx, protoload.Roots(root), nil, "x/d.proto"); err == nil ||
		!strings.Contains(err.Error(), "gazconsumer/v1/options.proto") {
		t.Fatalf("without options.proto: %v", err)
	}
	var fromRoots, err = protoload.Compile(ctx, protoload.WithOptionsProto(protoload.Roots(t.TempDir(), root)), nil, "x/d.proto", "x/a.proto")
	if err != nil {
		t.Fatal(err)
	}
	if got := paths(fromRoots); !slices.Equal(got, []string{"x/d.proto", "x/a.proto"}) {
		t.Fatalf("Compile returned %q, want the files in order", got)
	}
	fromMemory, err := protoload.Compile(ctx, protoload.WithOptionsProto(protoload.InMemory(sources)), nil, "x/d.proto")
	if err != nil {
		t.Fatal(err)
	}

	for _, fds := range [][]protoreflect.FileDescriptor{fromRoots, fromMemory} {
		var set = protoload.Collect(fds...)
		var got []string
		for _, f := range set.File {
			got = append(got, f.GetName())
		}
		// d's imports in order, each after its own: c's a and timestamp, b,
		// then options.proto after its imports; d. a is there once.
		if !slices.Equal(got, []string{"x/a.proto", "google/protobuf/timestamp.proto", "x/c.proto", "x/b.proto", "google/protobuf/descriptor.proto", "google/protobuf/duration.proto", "gazconsumer/v1/options.proto", "x/d.proto"}) {
			t.Fatalf("Collect = %q", got)
		}

		var b, err = proto.Marshal(set)
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := protoload.DecodeSet(b)
		if err != nil {
			t.Fatal(err)
		}
		files, err := protoload.LinkSet(decoded, false)
		if err != nil {
			t.Fatal(err)
		} else if files.NumFiles() != len(set.File) {
			t.Fatalf("linked %d files, want %d", files.NumFiles(), len(set.File))
		}
	}
	if got := paths(protoload.Imports(fromMemory[0])); !slices.Equal(got, []string{"x/c.proto", "x/b.proto", "gazconsumer/v1/options.proto"}) {
		t.Fatalf("Imports = %q", got)
	}
}

// A set without its imports links only if they are the program's own, and
// asked for; a set that isn't one fails to decode.
func TestLinkSetWithLinkedImports(t *testing.T) {
	var fds, err = protoload.Compile(context.Background(), protoload.WithOptionsProto(protoload.InMemory(sources)), nil, "x/d.proto")
	if err != nil {
		t.Fatal(err)
	}
	var set = protoload.Collect(fds...)
	// Drop the files the program links: timestamp, descriptor, options.
	set.File = slices.DeleteFunc(set.File, func(f *descriptorpb.FileDescriptorProto) bool {
		return !strings.HasPrefix(f.GetName(), "x/")
	})
	if len(set.File) != 4 {
		t.Fatalf("set of %d files", len(set.File))
	}
	if _, err = protoload.LinkSet(set, false); err == nil {
		t.Fatal("linked a set lacking imports")
	}
	files, err := protoload.LinkSet(set, true)
	if err != nil {
		t.Fatal(err)
	} else if _, err = files.FindFileByPath("gazconsumer/v1/options.proto"); err != nil {
		t.Fatal(err)
	} else if len(set.File) != 4 {
		t.Fatal("LinkSet modified the set")
	}
	if _, err = protoload.DecodeSet([]byte("not a set")); err == nil {
		t.Fatal("decoded garbage")
	}
}

// Errors are positioned at file:line:col, the file named by its import
// path.
func TestCompileErrorPosition(t *testing.T) {
	var root = writeTree(t, map[string]string{"bad.proto": "syntax = \"proto3\";\nmessage M {\n  Missing m = 1;\n}\n"})
	var _, err = protoload.Compile(context.Background(), protoload.Roots(root), nil, "bad.proto")
	if err == nil || err.Error() != "bad.proto:3:3: field M.m: unknown type Missing" {
		t.Fatalf("got %v", err)
	}
}

// Import roots are those given, else buf.yaml's modules, else the
// directories given and a root of the files given.
func TestImportRoots(t *testing.T) {
	var dir = writeTree(t, map[string]string{
		"v2/buf.yaml":  "version: v2\nmodules:\n  - path: proto\n  - path: third_party\n",
		"v1/buf.yaml":  "version: v1\n",
		"bad/buf.yaml": "modules: [",
		"p/q/x.proto":  "",
	})
	var p, q, x = filepath.Join(dir, "p"), filepath.Join(dir, "p", "q"), filepath.Join(dir, "p", "q", "x.proto")
	for _, c := range []struct {
		given    []string
		buf      string
		fileRoot string
		want     []string
	}{
		{[]string{"a", "b"}, filepath.Join(dir, "v2/buf.yaml"), ".", []string{"a", "b"}},
		{nil, filepath.Join(dir, "v2/buf.yaml"), ".", []string{filepath.Join(dir, "v2/proto"), filepath.Join(dir, "v2/third_party")}},
		{nil, filepath.Join(dir, "v1/buf.yaml"), ".", []string{filepath.Join(dir, "v1")}},
		{nil, filepath.Join(dir, "none/buf.yaml"), ".", []string{p, "."}},
		{nil, "", ".", []string{p, "."}},
		{nil, "", "", []string{q, p}},
	} {
		var got, err = protoload.ImportRoots(c.given, c.buf, []string{x, p}, c.fileRoot)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ImportRoots(%q, %q, fileRoot %q) = %q, %v; want %q", c.given, c.buf, c.fileRoot, got, err, c.want)
		}
	}
	if _, err := protoload.ImportRoots(nil, filepath.Join(dir, "bad/buf.yaml"), nil, "."); err == nil || !strings.Contains(err.Error(), "reading ") {
		t.Errorf("a bad buf.yaml: %v", err)
	}

	if name, ok := protoload.ImportPath([]string{"other", p}, x); !ok || name != "q/x.proto" {
		t.Errorf("ImportPath = %q, %v", name, ok)
	}
	if _, ok := protoload.ImportPath([]string{q}, filepath.Join(p, "y.proto")); ok {
		t.Error("ImportPath found a file outside its roots")
	}
}
