package schemacheck_test

import (
	"context"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
	"github.com/gazconsumer/gazconsumer/schemacheck"
)

var update = flag.Bool("update", false, "rewrite the want files of testdata/cases")

// protoRoot holds gazconsumer/v1/options.proto.
const protoRoot = "../proto"

// compile compiles the .proto files of dir, which is their import root, as
// the command does: with source info.
func compile(t testing.TB, dir string) []protoreflect.FileDescriptor {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".proto") {
			rel, _ := filepath.Rel(dir, path)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return compileWith(t, protoload.Roots(dir, protoRoot), files...)
}

// compileWith compiles files found by r.
func compileWith(t testing.TB, r protocompile.Resolver, files ...string) []protoreflect.FileDescriptor {
	t.Helper()
	fds, err := tryCompile(r, files...)
	if err != nil {
		t.Fatalf("compiling %v: %v", files, err)
	}
	return fds
}

func tryCompile(r protocompile.Resolver, files ...string) ([]protoreflect.FileDescriptor, error) {
	return protoload.Compile(context.Background(), r, nil, files...)
}

// render is how a want file spells a finding: as Finding.String, after
// "previous:" if it is at a position of the previous version.
func render(f schemacheck.Finding) string {
	if f.Pos.Previous {
		return "previous:" + f.String()
	}
	return f.String()
}

// wantLine is a line of a want file: a finding's position, then a
// substring of what follows it.
var wantLine = regexp.MustCompile(`^((?:previous:)?\S+?:\d+:\d+: )(.+)$`)

// TestCases checks each pair of testdata/cases/NAME/{old,new}: its findings
// are those of its want file, one a line, each at the position the line
// gives and containing the rest of the line. A case without a want file
// must have no findings; one named allowed_* may have notes only, and any
// other must have a breaking finding.
func TestCases(t *testing.T) {
	dirs, err := filepath.Glob("testdata/cases/*")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, dir := range dirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			got := schemacheck.Check(compile(t, filepath.Join(dir, "old")), compile(t, filepath.Join(dir, "new")))
			var lines []string
			for _, f := range got {
				lines = append(lines, render(f))
			}
			wantFile := filepath.Join(dir, "want")
			if *update {
				if len(lines) == 0 {
					_ = os.Remove(wantFile)
				} else if err := os.WriteFile(wantFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			var want []string
			if b, err := os.ReadFile(wantFile); err == nil {
				want = strings.Split(strings.TrimSpace(string(b)), "\n")
			} else if !os.IsNotExist(err) {
				t.Fatal(err)
			}
			breaking := 0
			for _, w := range want {
				if !strings.Contains(w, ": note: ") {
					breaking++
				}
			}
			if allowed := strings.HasPrefix(filepath.Base(dir), "allowed_"); allowed && breaking != 0 {
				t.Fatalf("an allowed change has breaking findings in its want file")
			} else if !allowed && breaking == 0 {
				t.Fatalf("a breaking change has no breaking finding in its want file")
			}
			if len(lines) != len(want) {
				t.Fatalf("got %d findings, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
			}
			for i, w := range want {
				m := wantLine.FindStringSubmatch(w)
				if m == nil {
					t.Fatalf("want line %q is not POSITION: SUBSTRING", w)
				}
				if !strings.HasPrefix(lines[i], m[1]) || !strings.Contains(lines[i][len(m[1]):], m[2]) {
					t.Errorf("finding %d:\n got %s\nwant %s", i, lines[i], w)
				}
			}
		})
	}
}

// TestFindingsAtFilesWithoutSourceInfo checks that findings in files of a
// descriptor set without source info name the file alone.
func TestFindingsAtFilesWithoutSourceInfo(t *testing.T) {
	dir := "testdata/cases/key_fields_reordered"
	var sets [2][]protoreflect.FileDescriptor
	for i, side := range []string{"old", "new"} {
		for _, fd := range compile(t, filepath.Join(dir, side)) {
			fdp := protodesc.ToFileDescriptorProto(fd)
			fdp.SourceCodeInfo = nil
			stripped, err := protodesc.NewFile(fdp, registryOf(t, fd))
			if err != nil {
				t.Fatal(err)
			}
			sets[i] = append(sets[i], stripped)
		}
	}
	got := schemacheck.Check(sets[0], sets[1])
	if len(got) != 1 || got[0].Pos != (schemacheck.Position{Path: "shop.proto"}) ||
		!strings.HasPrefix(got[0].String(), `shop.proto: table "acme.v1.Spend": key fields reordered`) {
		t.Fatalf("got %v", got)
	}
}

// registryOf returns a resolver of the imports of fd.
func registryOf(t *testing.T, fd protoreflect.FileDescriptor) protodesc.Resolver {
	t.Helper()
	files, err := protoload.LinkSet(protoload.Collect(protoload.Imports(fd)...), false)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestOptionsFromDescriptorSet checks that annotations read from a
// descriptor set's wire form (as the options of a set built by buf or
// protoc are) compare equal to those compiled from source.
func TestOptionsFromDescriptorSet(t *testing.T) {
	compiled := compile(t, "testdata/cases/allowed_identical/old")
	set := protoload.Collect(compiled[0])
	b, err := proto.Marshal(set)
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
	}
	fd, err := files.FindFileByPath("shop.proto")
	if err != nil {
		t.Fatal(err)
	}
	if got := schemacheck.Check(compiled, []protoreflect.FileDescriptor{fd}); len(got) != 0 {
		t.Fatalf("the same files from a descriptor set: %v", got)
	}
	// And a change is found across the two forms.
	changed := compile(t, "testdata/cases/key_direction_changed/new")
	if got := schemacheck.Check([]protoreflect.FileDescriptor{fd}, changed); len(got) != 1 ||
		!strings.Contains(got[0].Message, "key field account changes from ascending to descending") {
		t.Fatalf("a changed direction against a descriptor set: %v", got)
	}
}

// TestRescaledGrowthIsANote: with Options.Rescaled, a family grown to a
// multiple of its partitions is a note naming gazconsumer rescale; grown
// otherwise, it stays breaking.
func TestRescaledGrowthIsANote(t *testing.T) {
	var dir = "testdata/cases/family_partitions_changed"
	var old, cur = compile(t, filepath.Join(dir, "old")), compile(t, filepath.Join(dir, "new"))
	var got = schemacheck.CheckWith(old, cur, schemacheck.Options{Rescaled: true})
	if len(got) != 1 || got[0].Severity != schemacheck.Note || !strings.Contains(got[0].Message, "deploy it with `gazconsumer rescale --consumer SpendCounter`") {
		t.Fatalf("2 to 4, rescaled: %v", got)
	}
	if got = schemacheck.Check(old, cur); len(got) != 1 || got[0].Severity != schemacheck.Breaking {
		t.Fatalf("2 to 4, not rescaled: %v", got)
	}
	// 4 to 2 is no rescale.
	if got = schemacheck.CheckWith(cur, old, schemacheck.Options{Rescaled: true}); len(got) != 1 || got[0].Severity != schemacheck.Breaking {
		t.Fatalf("4 to 2, rescaled: %v", got)
	}
}
