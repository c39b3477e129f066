package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/build/constraint"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/gazconsumer/gazconsumer/cmd/protoc-gen-gazconsumer/internal/gengc"
	"github.com/gazconsumer/gazconsumer/internal/protoload"
)

// compileSources compiles the .proto files of sources (by path), and
// returns a CodeGeneratorRequest generating paths.
func compileSources(t testing.TB, sources map[string]string, paths []string) *pluginpb.CodeGeneratorRequest {
	t.Helper()
	compiled, err := protoload.Compile(context.Background(), protoload.InMemory(sources, protoRoot), nil, paths...)
	if err != nil {
		t.Fatalf("compiling: %v\n%s", err, dumpSources(sources))
	}
	return request(t, compiled, paths)
}

// dumpSources returns the text of sources, for failures.
func dumpSources(sources map[string]string) string {
	var b strings.Builder
	var paths []string
	for p := range sources {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(&b, "=== %s\n%s\n", p, sources[p])
	}
	return b.String()
}

// permuted returns req with its files in another order of rng's: the files
// to generate in any order, and every file after those it imports, as
// protoc's requests have them.
func permuted(req *pluginpb.CodeGeneratorRequest, rng *rand.Rand) *pluginpb.CodeGeneratorRequest {
	out := proto.Clone(req).(*pluginpb.CodeGeneratorRequest)
	rng.Shuffle(len(out.FileToGenerate), func(i, j int) {
		out.FileToGenerate[i], out.FileToGenerate[j] = out.FileToGenerate[j], out.FileToGenerate[i]
	})
	placed := map[string]bool{}
	rest := slices.Clone(out.ProtoFile)
	out.ProtoFile = out.ProtoFile[:0]
	for len(rest) != 0 {
		var ready []int
		for i, f := range rest {
			if !slices.ContainsFunc(f.Dependency, func(d string) bool { return !placed[d] }) {
				ready = append(ready, i)
			}
		}
		i := ready[rng.IntN(len(ready))]
		placed[rest[i].GetName()] = true
		out.ProtoFile = append(out.ProtoFile, rest[i])
		rest = slices.Delete(rest, i, i+1)
	}
	return out
}

// generation is the output of the plugin for a request: its response, and
// the scaffolds it wrote (by path within their directory).
type generation struct {
	resp      *pluginpb.CodeGeneratorResponse
	scaffolds map[string][]byte
	dir       string // Of the scaffolds, which errors may name.
}

// generate runs the plugin on req, scaffolding if scaffold into directory
// sub of a directory of its own (of Go module example.test/golden).
func generate(t testing.TB, req *pluginpb.CodeGeneratorRequest, scaffold bool, sub string) generation {
	t.Helper()
	var opts gengc.Options
	dir := t.TempDir()
	if scaffold {
		if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.test/golden\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		opts = gengc.Options{ScaffoldDir: filepath.Join(dir, sub, "scaffold"), ScaffoldMainDir: filepath.Join(dir, sub, "cmd")}
	}
	g := generation{resp: runPluginOpts(req, opts), scaffolds: map[string][]byte{}, dir: dir}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "go.mod" {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		g.scaffolds[filepath.ToSlash(rel)], err = os.ReadFile(p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// equal reports whether two generations are the same, byte for byte, but
// for the directories of their scaffolds.
func (g generation) equal(o generation) bool {
	marshal := func(g generation) []byte {
		resp := proto.Clone(g.resp).(*pluginpb.CodeGeneratorResponse)
		if resp.Error != nil {
			resp.Error = proto.String(strings.ReplaceAll(resp.GetError(), g.dir, "DIR"))
		}
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(resp)
		return b
	}
	a, b := marshal(g), marshal(o)
	if !bytes.Equal(a, b) || len(g.scaffolds) != len(o.scaffolds) {
		return false
	}
	for p, content := range g.scaffolds {
		if !bytes.Equal(content, o.scaffolds[p]) {
			return false
		}
	}
	return true
}

// positioned matches an error positioned in a .proto file.
var positioned = regexp.MustCompile(`^([\w./-]+\.proto):(\d+):(\d+): \S`)

// checkPositioned fails t unless err is positioned at a line and column of
// a file of sources.
func checkPositioned(t testing.TB, err string, sources map[string]string) {
	t.Helper()
	m := positioned.FindStringSubmatch(err)
	if m == nil {
		t.Fatalf("error %q is not positioned in a .proto file\n%s", err, dumpSources(sources))
	}
	src, ok := sources[m[1]]
	line, _ := strconv.Atoi(m[2])
	col, _ := strconv.Atoi(m[3])
	lines := strings.Split(src, "\n")
	if !ok || line < 1 || line > len(lines) || col < 1 || col > len(lines[line-1])+1 {
		t.Fatalf("error %q is positioned outside the files of the request\n%s", err, dumpSources(sources))
	}
}

// TestRequestOrder checks that the output (generated files, errors and
// scaffolds) is independent of the order of the files in the request.
func TestRequestOrder(t *testing.T) {
	type request struct {
		name string
		req  *pluginpb.CodeGeneratorRequest
	}
	var reqs []request
	var all []string
	for _, gc := range goldenCases {
		reqs = append(reqs, request{gc.name, compile(t, "testdata/protos", gc.files)})
		all = append(all, gc.files...)
	}
	reqs = append(reqs, request{"all goldens", compile(t, "testdata/protos", all)})
	for i := range 8 {
		s := newRandomSample(rand.New(rand.NewPCG(uint64(i), 1)), fmt.Sprintf("o%d", i))
		reqs = append(reqs, request{s.name, compileSources(t, s.files, s.paths)})
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for _, r := range reqs {
		want := generate(t, r.req, true, "s")
		for range 4 {
			if got := generate(t, permuted(r.req, rng), true, "s"); !got.equal(want) {
				t.Errorf("%s: the output depends on the order of the request's files (error %q, then %q)", r.name, want.resp.GetError(), got.resp.GetError())
				break
			}
		}
	}
}

// randomOutcomes are the outcomes of random samples through the plugin.
type randomOutcomes struct {
	accepted, rejected int
	files              map[string][]byte // Go files generated, by path within module example.test/golden.
	sources            map[string]map[string]string
	protos             map[string][]string // The .proto files accepted, by the Go import path of their code.
}

// newRandomOutcomes returns outcomes of no sample yet.
func newRandomOutcomes() *randomOutcomes {
	return &randomOutcomes{files: map[string][]byte{}, sources: map[string]map[string]string{}, protos: map[string][]string{}}
}

// runRandom runs sample s through the plugin (scaffolding if scaffold) and
// protoc-gen-go, checks that the output is independent of the order of the
// request's files, and adds the output to o, or checks that the error is
// positioned.
func (o *randomOutcomes) run(t testing.TB, s randomSample, scaffold bool, rng *rand.Rand) {
	t.Helper()
	req := compileSources(t, s.files, s.paths)
	g := generate(t, req, scaffold, s.name)
	if got := generate(t, permuted(req, rng), scaffold, s.name); !got.equal(g) {
		t.Fatalf("%s: the output depends on the order of the request's files (error %q, then %q)\n%s", s.name, g.resp.GetError(), got.resp.GetError(), dumpSources(s.files))
	}
	if g.resp.Error != nil {
		checkPositioned(t, g.resp.GetError(), s.files)
		if len(g.resp.File) != 0 || len(g.scaffolds) != 0 {
			t.Fatalf("%s: the plugin failed (%s) but wrote files", s.name, g.resp.GetError())
		}
		o.rejected++
		return
	}
	o.accepted++
	o.sources[s.name] = s.files
	for _, p := range s.paths {
		o.protos[s.goPaths[p]] = append(o.protos[s.goPaths[p]], p)
	}
	const prefix = "example.test/golden/"
	for _, resp := range []*pluginpb.CodeGeneratorResponse{runProtocGenGo(t, req), g.resp} {
		for _, f := range resp.File {
			name, ok := strings.CutPrefix(f.GetName(), prefix)
			if !ok {
				t.Fatalf("%s: generated file %s is outside %s", s.name, f.GetName(), prefix)
			}
			o.files[name] = []byte(f.GetContent())
		}
	}
	for p, content := range g.scaffolds {
		o.files[p] = content
	}
}

// sampleOf returns the sample of a path within the module.
func sampleOf(p string) string {
	s, _, _ := strings.Cut(p, "/")
	return s
}

// TestRandomProtos takes random samples of annotated .proto files through
// the plugin: each is rejected with an error positioned in one of its
// files, or its output (generated files, harnesses and scaffolds) compiles
// and is vet clean, all in one module and one go vet, and its messages,
// populated with random values, round-trip through the codecs and framings
// of generated code (see testdata/roundtrip), all in one test binary.
// FuzzRandomProtos takes more, type-checking them (and the round trips) in
// process.
func TestRandomProtos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	o := newRandomOutcomes()
	rng := rand.New(rand.NewPCG(1, 2))
	// GAZCONSUMER_RANDOM_SEED takes other samples than the usual ones.
	seed, _ := strconv.ParseUint(os.Getenv("GAZCONSUMER_RANDOM_SEED"), 10, 64)
	for i := range 40 {
		s := newRandomSample(rand.New(rand.NewPCG(uint64(i), 0x5eed+seed)), fmt.Sprintf("r%02d", i))
		o.run(t, s, i%2 == 0, rng)
	}
	t.Logf("%d samples accepted, %d rejected", o.accepted, o.rejected)
	if o.accepted < 10 || o.rejected < 5 {
		t.Fatalf("%d samples accepted and %d rejected: the samples no longer exercise both", o.accepted, o.rejected)
	}
	dir := t.TempDir()
	writeModule(t, dir)
	var pkgs []string
	for p, content := range o.files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if pkg := "./" + sampleOf(p) + "/..."; !slices.Contains(pkgs, pkg) {
			pkgs = append(pkgs, pkg)
		}
	}
	for p, content := range roundTripFiles(t, o.protos, o.files, nil) {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(pkgs)
	pkgs = append(pkgs, "./"+roundTripDir, "./"+roundTripAll)
	cmd := exec.Command("go", append([]string{"vet"}, pkgs...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet of the accepted samples: %v\n%s\n%s", err, out, failingSources(string(out), o.sources))
	}

	// Every file accepted had its messages taken round, those with fast
	// codecs and those without; and the usual samples accepted declare the
	// constructs whose encodings differ most.
	checked := runRoundTrip(t, dir)
	var slow, fast int
	for _, files := range o.protos {
		for _, f := range files {
			c, ok := checked[f]
			if !ok {
				t.Errorf("the messages of %s were not taken round", f)
			}
			slow, fast = slow+c[0], fast+c[1]
		}
	}
	t.Logf("messages taken round: %d with fast codecs, %d without", fast, slow)
	if fast < 20 || slow < 20 {
		t.Errorf("%d messages with fast codecs and %d without were taken round: the samples no longer exercise both", fast, slow)
	}
	var all strings.Builder
	for _, files := range o.sources {
		for _, src := range files {
			all.WriteString(src)
		}
	}
	for _, construct := range []string{"group ", "extend ", "extensions ", "oneof ", "map<", "packed = true", "packed = false",
		"default = ", "repeated_field_encoding = EXPANDED", "message_encoding = DELIMITED", "google.protobuf.Duration", "required ",
		"rescalable: true", "on_failure: {", "(gazconsumer.v1.handler).on_failure = {", `ttl: "`} {
		if !strings.Contains(all.String(), construct) && seed == 0 {
			t.Errorf("no sample accepted declares %q", construct)
		}
	}
	// Of what they declare, these are generated.
	var generated strings.Builder
	for _, content := range o.files {
		generated.Write(content)
	}
	for _, code := range []string{"table.Expires(", ".OnFailure(runtime.FailurePolicy{", "OnFailure: runtime.FailurePolicy{", "table.Fires("} {
		if !strings.Contains(generated.String(), code) && seed == 0 {
			t.Errorf("no sample accepted generates %q", code)
		}
	}
}

// failingSources returns the sources of the samples named in out.
func failingSources(out string, sources map[string]map[string]string) string {
	var b strings.Builder
	for name, files := range sources {
		if strings.Contains(out, name+"/") {
			b.WriteString(dumpSources(files))
		}
	}
	return b.String()
}

// FuzzRandomProtos takes random samples of annotated .proto files through
// the plugin: each is rejected with an error positioned in one of its
// files, or its output type-checks.
func FuzzRandomProtos(f *testing.F) {
	for i := range 4 {
		f.Add(uint64(i), uint64(0xf00d), i%2 == 0)
	}
	tc := newTypeChecker(f)
	rng := rand.New(rand.NewPCG(3, 4))
	f.Fuzz(func(t *testing.T, seed1, seed2 uint64, scaffold bool) {
		s := newRandomSample(rand.New(rand.NewPCG(seed1, seed2)), "fz")
		o := newRandomOutcomes()
		o.run(t, s, scaffold, rng)
		if o.accepted == 0 {
			return
		}
		maps.Copy(o.files, roundTripFiles(t, o.protos, o.files, nil))
		if err := tc.check(o.files); err != nil {
			t.Fatalf("the output does not type-check: %v\n%s", err, dumpSources(s.files))
		}
	})
}

// typeChecker type-checks generated packages in process, against the export
// data of the packages they import.
type typeChecker struct {
	fset    *token.FileSet
	exports map[string]string // By import path.
	gc      types.Importer
}

// newTypeChecker builds the packages generated code imports, and returns a
// typeChecker of them.
func newTypeChecker(t testing.TB) *typeChecker {
	dir := t.TempDir()
	gomod, gosum := moduleFiles(t, "example.test/golden")
	var deps strings.Builder
	deps.WriteString("// Package deps imports what generated code does.\npackage deps\n\nimport (\n")
	for _, p := range []string{
		"github.com/gazconsumer/gazconsumer/runtime", "github.com/gazconsumer/gazconsumer/runtime/table",
		"github.com/gazconsumer/gazconsumer/runtime/codec", "github.com/gazconsumer/gazconsumer/runtime/consumertest",
		"github.com/gazconsumer/gazconsumer/runtime/producer",
		"github.com/gazconsumer/gazconsumer/runtime/runconsumer", "github.com/gazconsumer/gazconsumer/store/rocks",
		"github.com/gazconsumer/gazconsumer/keyenc", "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1",
		"go.gazette.dev/core/message", "go.gazette.dev/core/broker/protocol", "go.gazette.dev/core/consumer/protocol",
		"google.golang.org/protobuf/reflect/protoreflect", "google.golang.org/protobuf/runtime/protoimpl",
		"google.golang.org/protobuf/encoding/protojson", "google.golang.org/protobuf/encoding/protowire",
		"google.golang.org/protobuf/types/known/timestamppb", "google.golang.org/protobuf/types/known/emptypb",
		"google.golang.org/protobuf/types/gofeaturespb", "google.golang.org/protobuf/proto",
		"github.com/planetscale/vtprotobuf/protohelpers",
		"github.com/planetscale/vtprotobuf/types/known/timestamppb", "github.com/planetscale/vtprotobuf/types/known/emptypb",
		"google.golang.org/protobuf/reflect/protoregistry", "google.golang.org/protobuf/encoding/prototext",
		"go.gazette.dev/core/labels",
		"bufio", "bytes", "encoding/binary", "errors", "fmt", "hash/fnv", "io", "math", "math/rand/v2", "reflect", "slices", "strings", "sync",
		"testing", "time", "unicode/utf8", "unsafe",
	} {
		fmt.Fprintf(&deps, "\t_ %q\n", p)
	}
	deps.WriteString(")\n")
	for name, content := range map[string][]byte{"go.mod": gomod, "go.sum": gosum, "deps/deps.go": []byte(deps.String())} {
		full := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}", "./deps")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list -export: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	tc := &typeChecker{fset: token.NewFileSet(), exports: map[string]string{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if p, export, ok := strings.Cut(line, "\t"); ok && export != "" {
			tc.exports[p] = export
		}
	}
	tc.gc = importer.ForCompiler(tc.fset, "gc", func(p string) (io.ReadCloser, error) {
		export, ok := tc.exports[p]
		if !ok {
			return nil, fmt.Errorf("no export data of %s", p)
		}
		return os.Open(export)
	})
	return tc
}

// buildsByDefault reports whether the Go file src is built without build
// tags, on this platform.
func buildsByDefault(src []byte) bool {
	for _, line := range strings.Split(string(src), "\n") {
		if !strings.HasPrefix(line, "//") && strings.TrimSpace(line) != "" {
			break
		} else if !constraint.IsGoBuild(line) {
			continue
		}
		expr, err := constraint.Parse(line)
		if err != nil {
			return false
		}
		return expr.Eval(func(tag string) bool {
			return tag == goruntime.GOOS || tag == goruntime.GOARCH || tag == "gc" || tag == "cgo" || tag == "unix" || strings.HasPrefix(tag, "go1.")
		})
	}
	return true
}

// importerFunc is a types.Importer.
type importerFunc func(string) (*types.Package, error)

func (f importerFunc) Import(p string) (*types.Package, error) { return f(p) }

// check type-checks the Go files of files (by path within module
// example.test/golden), and returns the first errors.
func (tc *typeChecker) check(files map[string][]byte) error {
	const module = "example.test/golden/"
	parsed := map[string][]*ast.File{} // By import path.
	for p, content := range files {
		if !strings.HasSuffix(p, ".go") {
			continue
		}
		if !buildsByDefault(content) {
			continue // As protoc-gen-go's files of the hybrid API for the opaque one (tag protoopaque).
		}
		f, err := parser.ParseFile(tc.fset, p, content, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := module + path.Dir(p)
		parsed[pkg] = append(parsed[pkg], f)
	}
	checked := map[string]*types.Package{}
	var errs []error
	var imp importerFunc
	imp = func(p string) (*types.Package, error) {
		if pkg, ok := checked[p]; ok {
			if pkg == nil {
				return nil, fmt.Errorf("import cycle through %s", p)
			}
			return pkg, nil
		}
		fs, ok := parsed[p]
		if !ok {
			return tc.gc.Import(p)
		}
		checked[p] = nil
		conf := types.Config{Importer: imp, Error: func(err error) {
			if len(errs) < 10 {
				errs = append(errs, err)
			}
		}}
		pkg, _ := conf.Check(p, tc.fset, fs, nil)
		checked[p] = pkg
		return pkg, nil
	}
	var pkgs []string
	for p := range parsed {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		if _, err := imp(p); err != nil {
			return err
		}
	}
	return errors.Join(errs...)
}
