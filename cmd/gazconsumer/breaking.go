package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/reporter"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
	"github.com/gazconsumer/gazconsumer/schemacheck"
)

type breakingFlags struct {
	against    string
	protoPaths []string
	rescaled   bool
}

func newBreakingCmd() *cobra.Command {
	var f breakingFlags
	var cmd = &cobra.Command{
		Use:   "breaking --against (git:REF | PREVIOUS.binpb) [-I DIR]... (FILE.proto | DIR)... | CURRENT.binpb",
		Short: "Refuse .proto changes that break the state consumers have stored",
		Long: `breaking compares the annotated .proto files of the current version with a
previous one, and refuses the changes that break what consumers have stored:
a table's name changed, its key fields added, removed, reordered, retyped or
reversed, a stored value field's number reused with another type; a journal
message's framing, uuid_field, message_type or partition key changed, or
its family's partitions where a consumer holding tables reads it; a
consumer that drops a table or a handler rpc. It prints each as
file:line:col: what changed and what becomes of the stored data, and exits
with status 1 if there is any (as it does if an input is unusable). A table
given a new explicit name is a new table, which starts empty: that is the way
to change a key on purpose, and it is printed as a note. With --rescaled, a
family grown to a multiple of its partitions is a note too, naming the
command that deploys it: gazconsumer rescale.

The current version is .proto files, or directories of them, compiled as
protoc or buf would (no generated code or plugin needed: run it before
buf generate), or a FileDescriptorSet (buf build -o FILE.binpb; protoc
--include_imports --include_source_info --descriptor_set_out=FILE.binpb).
Import roots are the -I flags; without any, the modules of ./buf.yaml (v2);
without either, the directories given, and "." for the files given.
gazconsumer/v1/options.proto and the well-known types are built in, for
imports no root holds.

The previous version is --against:
  git:REF        the same .proto files (those of the directories given, at
                 REF) read from the git repository of the working directory
                 at REF: a branch, tag or commit (git:origin/main in CI,
                 git:v1.4.0 for the version deployed);
  FILE.binpb     a FileDescriptorSet of the previous version: one kept as the
                 schema deployed, or built from another repository.

Positions of something removed are in the previous version, named
REF:path:line:col or FILE.binpb:path:line:col.`,
		Example: `  gazconsumer breaking --against git:origin/main proto/
  gazconsumer breaking --against deployed.binpb -I proto -I third_party proto/acme/shop/v1/shop.proto`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runBreaking(cmd.Context(), cmd.OutOrStdout(), f, args)
		},
	}
	cmd.Flags().StringVar(&f.against, "against", "", "previous version: git:REF, or a FileDescriptorSet file")
	cmd.Flags().StringArrayVarP(&f.protoPaths, "proto-path", "I", nil, "import root of the .proto files (repeatable; default: buf.yaml's modules, or the directories given)")
	cmd.Flags().BoolVar(&f.rescaled, "rescaled", false, "families' partitions grown to a multiple are deployed with `gazconsumer rescale`: report them as notes")
	_ = cmd.MarkFlagRequired("against")
	return cmd
}

// runBreaking prints the findings of comparing args with f.against, and
// fails if any breaks stored state.
func runBreaking(ctx context.Context, out io.Writer, f breakingFlags, args []string) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	inputs := make([]string, len(args))
	for i, arg := range args {
		if inputs[i], err = relative(wd, arg); err != nil {
			return fmt.Errorf("input %s: %w", arg, err)
		}
	}
	args = inputs
	cur, err := loadCurrent(ctx, f, args)
	if err != nil {
		return err
	}
	prev, err := loadPrevious(ctx, f, args)
	if err != nil {
		return err
	}
	var broken int
	for _, x := range schemacheck.CheckWith(prev.files, cur.files, schemacheck.Options{Rescaled: f.rescaled}) {
		v := cur
		if x.Pos.Previous {
			v = prev
		}
		x.Pos.Path = v.display(x.Pos.Path)
		fmt.Fprintln(out, x)
		if x.Severity == schemacheck.Breaking {
			broken++
		}
	}
	switch broken {
	case 0:
		return nil
	case 1:
		return errors.New("1 change breaks stored state")
	default:
		return fmt.Errorf("%d changes break stored state", broken)
	}
}

// version is one version of the files compared.
type version struct {
	files []protoreflect.FileDescriptor
	// paths maps the path of a file, as its descriptor names it, to the path
	// printed. Paths it lacks are printed as they are.
	paths map[string]string
	// prefix is printed before each path: "REF:" for the files of a git
	// ref, "FILE:" for those of a previous descriptor set.
	prefix string
}

// display returns the path printed for file path p.
func (v *version) display(p string) string {
	if d, ok := v.paths[p]; ok {
		p = d
	}
	return v.prefix + p
}

// isDescriptorSet reports whether an input names a descriptor set rather
// than .proto files: a file not named *.proto.
func isDescriptorSet(arg string) bool {
	info, err := os.Stat(arg)
	return err == nil && info.Mode().IsRegular() && !strings.HasSuffix(arg, ".proto")
}

// loadCurrent loads the current version: args, .proto files and
// directories or one descriptor set.
func loadCurrent(ctx context.Context, f breakingFlags, args []string) (*version, error) {
	if slices.ContainsFunc(args, isDescriptorSet) {
		if len(args) != 1 {
			return nil, fmt.Errorf("a descriptor set is the only input, not one of %d", len(args))
		} else if strings.HasPrefix(f.against, "git:") {
			return nil, fmt.Errorf("--against %s compares .proto files: give the current .proto files or directories, not descriptor set %s", f.against, args[0])
		}
		files, err := readDescriptorSet(args[0])
		if err != nil {
			return nil, err
		}
		return &version{files: files}, nil
	}
	roots, err := importRoots(f.protoPaths, args)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, arg := range args {
		info, err := os.Stat(arg)
		if err != nil {
			return nil, err
		} else if !info.IsDir() {
			paths = append(paths, filepath.Clean(arg))
			continue
		}
		err = filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && p != arg && strings.HasPrefix(d.Name(), "."):
				return filepath.SkipDir
			case !d.IsDir() && strings.HasSuffix(p, ".proto"):
				paths = append(paths, filepath.Clean(p))
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", arg, err)
		}
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no .proto files in %s", strings.Join(args, ", "))
	}
	open := func(p string) (io.ReadCloser, error) { return os.Open(p) }
	return compileProtos(ctx, roots, paths, open, "")
}

// loadPrevious loads the previous version that f.against names, for the
// inputs args.
func loadPrevious(ctx context.Context, f breakingFlags, args []string) (*version, error) {
	ref, ok := strings.CutPrefix(f.against, "git:")
	if !ok {
		files, err := readDescriptorSet(f.against)
		if err != nil {
			return nil, err
		}
		return &version{files: files, prefix: f.against + ":"}, nil
	}
	roots, err := importRoots(f.protoPaths, args)
	if err != nil {
		return nil, err
	}
	repo, err := openGitRef(ctx, ref, append(slices.Clone(roots), args...))
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, arg := range args {
		arg = filepath.Clean(arg)
		for p := range repo.files {
			if strings.HasSuffix(p, ".proto") && (p == arg || inDir(arg, p)) {
				paths = append(paths, p)
			}
		}
	}
	slices.Sort(paths)
	paths = slices.Compact(paths)
	if len(paths) == 0 {
		// Nothing existed: everything is new.
		return &version{prefix: ref + ":"}, nil
	}
	return compileProtos(ctx, roots, paths, repo.open, ref+":")
}

// inDir reports whether path p, not hidden, is within directory dir.
func inDir(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return false
	}
	for _, part := range strings.Split(filepath.Dir(rel), string(filepath.Separator)) {
		if strings.HasPrefix(part, ".") && part != "." {
			return false
		}
	}
	return true
}

// importRoots returns the import roots of the .proto files of args, as
// paths relative to the working directory: protoPaths if any, or else the
// modules of ./buf.yaml, or else the directories of args and, for the files
// of args, ".".
func importRoots(protoPaths, args []string) ([]string, error) {
	roots, err := protoload.ImportRoots(protoPaths, "buf.yaml", args, ".")
	if err != nil {
		return nil, err
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(roots))
	for i, r := range roots {
		if out[i], err = relative(wd, r); err != nil {
			return nil, fmt.Errorf("import root %s: %w", r, err)
		}
	}
	return out, nil
}

// relative returns path p relative to the working directory wd, by its
// shortest path (as git prints paths), so that paths compare equal.
func relative(wd, p string) (string, error) {
	if !filepath.IsAbs(p) {
		p = filepath.Join(wd, p)
	}
	return filepath.Rel(wd, p)
}

// compileProtos compiles paths, .proto files relative to the working
// directory under roots, whose contents open returns. Positions in errors,
// and the paths of the version returned, are printed as prefix and the path
// of the file opened.
func compileProtos(ctx context.Context, roots, paths []string, open func(string) (io.ReadCloser, error), prefix string) (*version, error) {
	v := &version{paths: map[string]string{}, prefix: prefix}
	var names []string
	for _, p := range paths {
		name, err := importPath(roots, p)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	var mu sync.Mutex
	resolve := protocompile.ResolverFunc(func(name string) (protocompile.SearchResult, error) {
		for _, r := range roots {
			p := filepath.Join(r, filepath.FromSlash(name))
			rc, err := open(p)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			} else if err != nil {
				return protocompile.SearchResult{}, err
			}
			mu.Lock()
			v.paths[name] = p
			mu.Unlock()
			return protocompile.SearchResult{Source: rc}, nil
		}
		if r, err := protoload.OptionsProto.FindFileByPath(name); err == nil {
			return r, nil
		}
		return protocompile.SearchResult{}, fmt.Errorf("%s is in no import root (%s): %w", name, strings.Join(roots, ", "), fs.ErrNotExist)
	})
	// Errors name the file as opened, rather than by its import path.
	positioned := func(err reporter.ErrorWithPos) error {
		pos := err.GetPosition()
		mu.Lock()
		defer mu.Unlock()
		return fmt.Errorf("%s:%d:%d: %w", v.display(pos.Filename), pos.Line, pos.Col, err.Unwrap())
	}
	var errs []error
	rep := reporter.NewReporter(func(err reporter.ErrorWithPos) error {
		e := positioned(err)
		mu.Lock()
		errs = append(errs, e)
		mu.Unlock()
		return nil // Go on, to report every error.
	}, nil)
	compiled, err := protoload.Compile(ctx, resolve, rep, names...)
	var withPos reporter.ErrorWithPos
	switch {
	case len(errs) != 0:
		return nil, errors.Join(errs...)
	case errors.As(err, &withPos):
		return nil, positioned(withPos)
	case err != nil:
		return nil, err
	}
	v.files = compiled
	return v, nil
}

// importPath returns the path by which file p, under one of roots, is
// imported.
func importPath(roots []string, p string) (string, error) {
	if name, ok := protoload.ImportPath(roots, p); ok {
		return name, nil
	}
	return "", fmt.Errorf("%s is in no import root (%s): name its root with -I", p, strings.Join(roots, ", "))
}

// readDescriptorSet reads the files of the FileDescriptorSet at path. Its
// imports must be in it (protoc --include_imports; buf build includes them),
// but for gazconsumer/v1/options.proto and the well-known types.
func readDescriptorSet(path string) ([]protoreflect.FileDescriptor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	set, err := protoload.DecodeSet(b)
	if err != nil {
		return nil, fmt.Errorf("%s is not a FileDescriptorSet: %w", path, err)
	} else if len(set.File) == 0 {
		return nil, fmt.Errorf("%s is not a FileDescriptorSet: it holds no files", path)
	}
	files, err := protoload.LinkSet(set, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (a set built by protoc needs --include_imports)", path, err)
	}
	var out []protoreflect.FileDescriptor
	files.RangeFiles(func(f protoreflect.FileDescriptor) bool {
		out = append(out, f)
		return true
	})
	slices.SortFunc(out, func(a, b protoreflect.FileDescriptor) int { return strings.Compare(a.Path(), b.Path()) })
	return out, nil
}

// gitRef reads the files of a commit of the git repository of the working
// directory.
type gitRef struct {
	ctx    context.Context
	commit string
	// files holds the paths of the files of the commit under the paths it
	// was opened for, relative to the working directory.
	files map[string]bool
}

// openGitRef resolves ref to a commit, and lists its files under paths.
func openGitRef(ctx context.Context, ref string, paths []string) (*gitRef, error) {
	out, err := git(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		return nil, fmt.Errorf("git:%s is not a commit of the repository of the working directory: %w", ref, err)
	}
	g := &gitRef{ctx: ctx, commit: strings.TrimSpace(string(out)), files: map[string]bool{}}
	out, err = git(ctx, append([]string{"ls-tree", "-r", "-z", "--name-only", g.commit, "--"}, paths...)...)
	if err != nil {
		return nil, fmt.Errorf("listing the files of git:%s: %w", ref, err)
	}
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			g.files[filepath.Clean(filepath.FromSlash(p))] = true
		}
	}
	return g, nil
}

// open returns the content of file p, relative to the working directory,
// at the commit, or an fs.ErrNotExist error if it has no such file.
func (g *gitRef) open(p string) (io.ReadCloser, error) {
	p = filepath.Clean(p)
	if !g.files[p] {
		return nil, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	spec := filepath.ToSlash(p)
	if !strings.HasPrefix(spec, "../") {
		spec = "./" + spec // Relative to the working directory, not the repository's root.
	}
	out, err := git(g.ctx, "cat-file", "blob", g.commit+":"+spec)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", p, err)
	}
	return io.NopCloser(bytes.NewReader(out)), nil
}

// git runs git with args in the working directory, and returns its output.
func git(ctx context.Context, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("git %s: %w: %s", args[0], err, msg)
		}
		return nil, fmt.Errorf("git %s: %w", args[0], err)
	}
	return stdout.Bytes(), nil
}
