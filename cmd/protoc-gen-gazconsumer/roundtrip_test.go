package main

import (
	"bytes"
	"fmt"
	"go/format"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/pluginpb"

	"github.com/gazconsumer/gazconsumer/cmd/protoc-gen-gazconsumer/internal/gengc"
)

// The packages of a module of generated code which take its messages round
// (see testdata/roundtrip): package roundtrip, and the test of roundTripAll
// checking the messages of every generated package.
const (
	roundTripDir = "roundtrip"
	roundTripAll = "roundtripall"
	// roundTripTest is the test of roundTripAll.
	roundTripTest = "TestRoundTrip"
)

// A roundTripText is a message to take round, written in protobuf's text
// format (see roundtrip.CheckText).
type roundTripText struct {
	message string   // Full name.
	texts   []string // Messages, whose encodings concatenated merge too.
}

// roundTripFiles returns the files, by path within module
// example.test/golden, of the packages taking the messages of the .proto
// files of protos (by the Go import path of their generated code) round, in
// one test binary, random messages and those of texts (by .proto file).
// Generated holds the generated files, which tell the packages with a
// NewMessage.
func roundTripFiles(t testing.TB, protos map[string][]string, generated map[string][]byte, texts map[string][]roundTripText) map[string][]byte {
	t.Helper()
	const module = "example.test/golden/"
	src, err := os.ReadFile(filepath.Join("testdata", "roundtrip", "roundtrip.go"))
	if err != nil {
		t.Fatal(err)
	}
	withNewMessage := map[string]bool{}
	for p, content := range generated {
		if strings.HasSuffix(p, gengc.FileSuffix) && bytes.Contains(content, []byte("\nfunc NewMessage(")) {
			withNewMessage[module+path.Dir(p)] = true
		}
	}
	var pkgs []string
	for p := range protos {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	var imports, calls strings.Builder
	for i, p := range pkgs {
		files := slices.Sorted(slices.Values(protos[p]))
		newMessage := "nil"
		if withNewMessage[p] {
			newMessage = fmt.Sprintf("p%d.NewMessage", i)
			fmt.Fprintf(&imports, "\tp%d %q\n", i, p)
		} else {
			fmt.Fprintf(&imports, "\t_ %q\n", p)
		}
		for _, f := range files {
			fmt.Fprintf(&calls, "\tt.Run(%q, func(t *testing.T) {\n\t\troundtrip.Check(t, %s, %q)\n", f, newMessage, f)
			for _, tt := range texts[f] {
				fmt.Fprintf(&calls, "\t\troundtrip.CheckText(t, %s, %q", newMessage, tt.message)
				for _, text := range tt.texts {
					fmt.Fprintf(&calls, ", %q", text)
				}
				calls.WriteString(")\n")
			}
			calls.WriteString("\t})\n")
		}
	}
	test := fmt.Sprintf(`// Package %s takes the messages of the generated packages of its module
// round, through the codecs and framings of generated code.
package %s

import (
	"testing"

	%q
%s)

func %s(t *testing.T) {
%s}
`, roundTripAll, roundTripAll, module+roundTripDir, imports.String(), roundTripTest, calls.String())
	formatted, err := format.Source([]byte(test))
	if err != nil {
		t.Fatalf("formatting the round trip test: %v\n%s", err, test)
	}
	return map[string][]byte{
		roundTripDir + "/roundtrip.go": src,
		roundTripAll + "/all_test.go":  formatted,
	}
}

// checkedFiles matches a line of package roundtrip's log: a .proto file
// checked, its messages, and those of them with fast codecs.
var checkedFiles = regexp.MustCompile(`(?m)^\s+\w+\.go:\d+: (\S+\.proto): (\d+) messages, (\d+) with fast codecs$`)

// runRoundTrip runs the round trip test of the module in dir, and returns
// the messages it checked, with fast codecs or not, by .proto file.
func runRoundTrip(t *testing.T, dir string) map[string][2]int {
	t.Helper()
	cmd := exec.Command("go", "test", "-count=1", "-v", "-run", "^"+roundTripTest+"$", "./"+roundTripAll)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the round trips of generated messages: %v\n%s", err, out)
	}
	checked := map[string][2]int{}
	for _, m := range checkedFiles.FindAllStringSubmatch(string(out), -1) {
		n, _ := strconv.Atoi(m[2])
		fast, _ := strconv.Atoi(m[3])
		checked[m[1]] = [2]int{n - fast, fast}
	}
	return checked
}

// A roundTripCase is a Go package of .proto files of constructs whose
// fast codecs were once wrong, or didn't compile.
type roundTripCase struct {
	name  string
	files map[string]string // By path.
	// codecs are the files (by path) the plugin writes fast codecs of.
	codecs []string
	texts  map[string][]roundTripText // By path.
}

// protoFile returns a .proto file of syntax (or edition) and package pkg,
// of Go package roundtripcases/DIR, importing imports, declaring body.
func protoFile(syntax, pkg, dir string, imports []string, body string) string {
	var b strings.Builder
	if syntax == "2023" {
		b.WriteString("edition = \"2023\";\n\n")
	} else {
		fmt.Fprintf(&b, "syntax = %q;\n\n", syntax)
	}
	fmt.Fprintf(&b, "package %s;\n\n", pkg)
	for _, imp := range append([]string{"gazconsumer/v1/options.proto"}, imports...) {
		fmt.Fprintf(&b, "import %q;\n", imp)
	}
	fmt.Fprintf(&b, "\noption go_package = \"example.test/golden/roundtripcases/%s;%s\";\n\n%s", dir, path.Base(dir), body)
	return b.String()
}

var roundTripCases = []roundTripCase{{
	// A group read back through the generated NewMessage failed with
	// "unexpected EOF": vtprotobuf's codecs don't decode groups.
	name: "proto2_group",
	files: map[string]string{"group/v1/event.proto": protoFile("proto2", "group.v1", "group", nil, `
message Event {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid"};
  optional bytes uuid = 1;
  optional string name = 2;
  optional group Extra = 3 {
    optional string note = 4;
  }
}
`)},
	texts: map[string][]roundTripText{"group/v1/event.proto": {{"group.v1.Event", []string{
		`uuid: "0123456789abcdef" name: "n" Extra { note: "a note" }`,
		`Extra { }`,
		`name: "m" Extra { note: "another" }`,
	}}}},
}, {
	// Repeated groups, and groups in a oneof, had codecs that didn't
	// compile.
	name: "proto2_groups_repeated_and_in_oneof",
	files: map[string]string{"groups/v1/event.proto": protoFile("proto2", "groups.v1", "groups", nil, `
message Event {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid", framing: FRAMING_JSON};
  optional bytes uuid = 1;
  repeated group Item = 2 {
    optional string sku = 1;
    optional group Price = 2 {
      optional int64 cents = 1;
    }
  }
  oneof choice {
    group Pick = 3 {
      optional int32 v = 1;
    }
    string other = 4;
  }
}
`)},
	texts: map[string][]roundTripText{"groups/v1/event.proto": {{"groups.v1.Event", []string{
		`Item { sku: "a" Price { cents: 3 } } Item { sku: "b" } Pick { v: 7 }`,
		`Item { sku: "c" } Pick { }`,
		`other: "x"`,
	}}}},
}, {
	// Extensions were dropped by the codecs, and decoding one reset the
	// message.
	name: "proto2_extensions",
	files: map[string]string{"extensions/v1/event.proto": protoFile("proto2", "extensions.v1", "extensions", nil, `
message Event {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid"};
  optional bytes uuid = 1;
  optional string name = 2;
  extensions 100 to 199;
}

extend Event {
  optional string tag = 100;
  repeated int32 counts = 101;
  optional Event inner = 102;
}
`)},
	texts: map[string][]roundTripText{"extensions/v1/event.proto": {{"extensions.v1.Event", []string{
		`name: "n" [extensions.v1.tag]: "t" [extensions.v1.counts]: [1, 2]`,
		`[extensions.v1.inner] { name: "i" [extensions.v1.tag]: "u" } name: "m"`,
	}}}},
}, {
	// -0.0 in a field without presence was encoded as +0.0 is: not at all.
	name: "proto3_negative_zero",
	files: map[string]string{"zero/v1/event.proto": protoFile("proto3", "zero.v1", "zero", nil, `
message Event {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid"};
  bytes uuid = 1;
  double d = 2;
  float f = 3;
  repeated double ds = 4;
  map<string, double> m = 5;
  oneof choice {
    double od = 6;
    float of = 7;
  }
  optional double pd = 8;
}
`)},
	codecs: []string{"zero/v1/event.proto"},
	texts: map[string][]roundTripText{"zero/v1/event.proto": {{"zero.v1.Event", []string{
		`d: -0 f: -0 ds: [-0, 0] m { key: "k" value: -0 } od: -0 pd: -0`,
		`d: 0 f: 0 of: -0 pd: 0`,
		`d: -1.5 f: -0`,
	}}}},
}, {
	// A message field of a type without codecs, of another package, was
	// decoded by protobuf's Unmarshal, which resets the field's message: a
	// field encoded twice held the last one only, where protobuf merges.
	name: "merge_without_codecs",
	files: map[string]string{
		"merge/v1/event.proto": protoFile("proto3", "merge.v1", "merge", []string{"merge/other/v1/other.proto"}, `
message Event {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid"};
  bytes uuid = 1;
  merge.other.v1.Other other = 2;
  oneof choice {
    merge.other.v1.Other picked = 3;
    string none = 4;
  }
}
`),
		"merge/other/v1/other.proto": protoFile("2023", "merge.other.v1", "mergeother", nil, `
message Other {
  string name = 1;
  repeated int32 seen = 2;
}
`)},
	codecs: []string{"merge/v1/event.proto"},
	texts: map[string][]roundTripText{"merge/v1/event.proto": {{"merge.v1.Event", []string{
		`other { name: "a" seen: 1 } picked { name: "b" seen: 2 }`,
		`other { seen: 3 } picked { seen: 4 }`,
	}}}},
}, {
	// A message of a file with codecs with a field of a type of its proto
	// package without (of another file, of an edition) had codecs calling
	// the type's, which don't exist: they didn't compile.
	name: "same_package_without_codecs",
	files: map[string]string{
		"same/v1/event.proto": protoFile("proto3", "same.v1", "same", []string{"same/v1/inner.proto"}, `
message Event {
  option (gazconsumer.v1.message).journal = {uuid_field: "uuid"};
  bytes uuid = 1;
  Inner inner = 2;
}
`),
		"same/v1/inner.proto": protoFile("2023", "same.v1", "same", nil, `
message Inner {
  string name = 1;
}
`),
		"same/v1/plain.proto": protoFile("proto3", "same.v1", "same", nil, `
message Plain {
  string name = 1;
  Plain next = 2;
}
`)},
	codecs: []string{"same/v1/plain.proto"},
	texts: map[string][]roundTripText{"same/v1/event.proto": {{"same.v1.Event", []string{
		`inner { name: "a" }`, `inner { name: "b" }`,
	}}}},
}}

// TestRoundTripCases takes the messages of roundTripCases round (random
// ones, and those of their texts), through the codecs and framings of
// generated code, in a module of their generated code; and checks which
// files have fast codecs.
func TestRoundTripCases(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	dir := t.TempDir()
	gomod, gosum := moduleFiles(t, "example.test/golden")
	files := map[string][]byte{"go.mod": gomod, "go.sum": gosum}
	generated := map[string][]byte{}
	protos := map[string][]string{}
	texts := map[string][]roundTripText{}
	const prefix = "example.test/golden/"
	for _, rc := range roundTripCases {
		var paths []string
		for p := range rc.files {
			paths = append(paths, p)
		}
		slices.Sort(paths)
		req := compileSources(t, rc.files, paths)
		resp := runPlugin(req)
		if resp.Error != nil {
			t.Fatalf("%s: %s", rc.name, resp.GetError())
		}
		var codecs []string
		for _, r := range []*pluginpb.CodeGeneratorResponse{runProtocGenGo(t, req), resp} {
			for _, f := range r.File {
				name := strings.TrimPrefix(f.GetName(), prefix)
				generated[name] = []byte(f.GetContent())
				if base, ok := strings.CutSuffix(path.Base(name), gengc.CodecsSuffix); ok {
					codecs = append(codecs, base)
				}
			}
		}
		var want []string
		for _, p := range rc.codecs {
			want = append(want, strings.TrimSuffix(path.Base(p), ".proto"))
		}
		slices.Sort(codecs)
		slices.Sort(want)
		if !slices.Equal(codecs, want) {
			t.Errorf("%s: the plugin wrote the codecs of %v, want those of %v", rc.name, codecs, want)
		}
		for _, p := range paths {
			goPath, _, _ := strings.Cut(regexp.MustCompile(`go_package = "([^"]*)"`).FindStringSubmatch(rc.files[p])[1], ";")
			protos[goPath] = append(protos[goPath], p)
		}
		maps.Copy(texts, rc.texts)
	}
	maps.Copy(files, generated)
	maps.Copy(files, roundTripFiles(t, protos, generated, texts))
	for name, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	checked := runRoundTrip(t, dir)
	for _, rc := range roundTripCases {
		for p := range rc.files {
			if c, ok := checked[p]; !ok || c[0]+c[1] == 0 {
				t.Errorf("%s: the messages of %s were not taken round", rc.name, p)
			}
		}
	}
}
