package gengc

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"go/token"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"

	"google.golang.org/protobuf/compiler/protogen"

	"github.com/gazconsumer/gazconsumer/templates"
)

// Import paths of the packages a scaffolded command uses.
const (
	pathRun   = "github.com/gazconsumer/gazconsumer/runtime/runconsumer"
	pathRocks = "github.com/gazconsumer/gazconsumer/store/rocks"
)

// scaffolds are the scaffolds of a request: the handler stubs of each
// consumer, in a subdirectory of Options.ScaffoldDir named for the
// consumer, and if Options.ScaffoldMainDir is set, its command, in a
// subdirectory of that.
type scaffolds struct {
	md             *model
	opts           Options
	handlersImport string // Of ScaffoldDir.
	pkgs           map[*consumer]string
}

// planScaffolds returns the scaffolds of md. It fails, positioned at the
// consumer, if the package of a consumer's scaffold would be no valid
// package of handlers, or the directory of another consumer's: of this
// request, or of one generated before (by another run of the plugin, as
// buf runs it once per directory), which its scaffold's files name.
func planScaffolds(md *model, opts Options) (*scaffolds, error) {
	if opts.ScaffoldMainDir != "" && opts.ScaffoldDir == "" {
		return nil, errors.New("option scaffold_main needs option scaffold too: the command it writes imports the handlers")
	}
	sc := &scaffolds{md: md, opts: opts, pkgs: map[*consumer]string{}}
	if opts.ScaffoldMainDir != "" {
		var err error
		if sc.handlersImport, err = goImportPath(opts.ScaffoldDir); err != nil {
			return nil, fmt.Errorf("option scaffold_main: %w", err)
		}
	}
	dirs := newScope("directory %s (option scaffold)", opts.ScaffoldDir)
	for _, fm := range md.files {
		for _, c := range fm.consumers {
			pkg := scaffoldPackage(c)
			p := posOf(c.svc.Desc) // Its name is at fault.
			switch {
			case token.IsKeyword(pkg):
				return nil, errorAt(p, "the handlers of consumer %s would be package %s, a Go keyword; rename the service", c.svc.Desc.FullName(), pkg)
			case pkg == "main":
				return nil, errorAt(p, "the handlers of consumer %s would be package main, which no package can import; rename the service", c.svc.Desc.FullName())
			}
			if err := dirs.declare(pkg, from(p, "the directory of the handlers of consumer %s", c.svc.Desc.FullName())); err != nil {
				return nil, err
			}
			sc.pkgs[c] = pkg
			for _, f := range sc.files(c) {
				if err := f.checkOwner(c); err != nil {
					return nil, err
				}
			}
		}
	}
	return sc, nil
}

// A scaffoldFile is a file of the scaffold of a consumer.
type scaffoldFile struct {
	path   string // Of the file.
	what   string // What it holds: "handlers" or "command".
	option string // The option naming the directory it is written in.
}

// files returns the files of the scaffold of consumer c.
func (sc *scaffolds) files(c *consumer) []scaffoldFile {
	out := []scaffoldFile{{filepath.Join(sc.opts.ScaffoldDir, sc.pkgs[c], "handlers.go"), "handlers", "scaffold"}}
	if sc.opts.ScaffoldMainDir != "" {
		out = append(out, scaffoldFile{filepath.Join(sc.opts.ScaffoldMainDir, sc.pkgs[c], "main.go"), "command", "scaffold_main"})
	}
	return out
}

// checkOwner fails, positioned at consumer c, if f exists and is the
// scaffold of another consumer, as its first lines tell.
func (f scaffoldFile) checkOwner(c *consumer) error {
	content, err := os.ReadFile(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	name := string(c.svc.Desc.FullName())
	if owner := scaffoldOwner(content); owner != "" && owner != name {
		return errorAt(posOf(c.svc.Desc),
			"the %s of consumer %s would be scaffolded as %s, which already holds the %s of consumer %s; "+
				"rename one of the services, or scaffold them into different directories (option %s); "+
				"if that file is this consumer's, renamed since, make its first line %q",
			f.what, name, f.path, f.what, owner, f.option, strings.TrimSuffix(scaffoldMarker(name), "\n\n"))
	}
	return nil
}

// scaffoldMarker returns the first line of the scaffold of consumer name
// (and a blank line): by it, a later generation knows whose scaffold a
// file is.
func scaffoldMarker(name string) string {
	return "// Scaffold of consumer " + name + ", written once by protoc-gen-gazconsumer.\n\n"
}

// scaffoldOwners match the lines naming the consumer of a scaffold: its
// marker, and the first lines of the handlers and the command scaffolded
// before there was a marker.
var scaffoldOwners = []*regexp.Regexp{
	regexp.MustCompile(`^// Scaffold of consumer ([\w.]+), written once by protoc-gen-gazconsumer\.`),
	regexp.MustCompile(`^// Handlers of consumer ([\w.]+), declared in `),
	regexp.MustCompile(`^// Command \w+ serves consumer ([\w.]+) as a member`),
}

// scaffoldOwner returns the consumer whose scaffold content is, as the
// comments before its package clause tell, or "" if they don't (as those
// of a file the user wrote).
func scaffoldOwner(content []byte) string {
	for line := range strings.Lines(string(content)) {
		if !strings.HasPrefix(line, "//") && strings.TrimSpace(line) != "" {
			break // The package clause.
		}
		for _, re := range scaffoldOwners {
			if m := re.FindStringSubmatch(line); m != nil {
				return m[1]
			}
		}
	}
	return ""
}

// write writes the scaffolds, but those whose file exists. It returns the
// paths written. It fails, positioned at the consumer, if a file written
// since planScaffolds looked (by a run of the plugin alongside) is another
// consumer's.
func (sc *scaffolds) write() ([]string, error) {
	var written []string
	for _, fm := range sc.md.files {
		for _, c := range fm.consumers {
			pkg := sc.pkgs[c]
			for _, f := range sc.files(c) {
				render := func() ([]byte, error) { return renderHandlers(sc.md, fm, c, pkg) }
				if f.what == "command" {
					render = func() ([]byte, error) { return renderMain(sc.md, fm, c, pkg, sc.handlersImport+"/"+pkg) }
				}
				wrote, err := writeOnce(f.path, render)
				if err != nil {
					return written, fmt.Errorf("scaffolding the %s of %s: %w", f.what, c.svc.Desc.FullName(), err)
				} else if wrote {
					written = append(written, f.path)
				} else if err := f.checkOwner(c); err != nil {
					return written, err
				}
			}
		}
	}
	return written, nil
}

// writeOnce writes the file at path with the content render returns, unless
// the file exists: once written, it is the user's. It reports whether it
// wrote it. The file appears whole, or not at all (but on a file system
// without hard links), to another run of the plugin checking whose it is.
func writeOnce(path string, render func() ([]byte, error)) (bool, error) {
	if _, err := os.Stat(path); err == nil {
		return false, nil // Written before: it is the user's now.
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	src, err := render()
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, err
	}
	// Written aside, then linked to path, which fails if path exists: never
	// overwrite, even a file created since the Stat.
	tmp := fmt.Sprintf("%s.%d-%x.tmp", path, os.Getpid(), rand.Uint64())
	if err := createFile(tmp, src); err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	err = os.Link(tmp, path)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	} else if err != nil {
		// No hard links here: create path exclusively.
		if err := createFile(path, src); errors.Is(err, fs.ErrExist) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	return true, nil
}

// createFile creates the file at path, which must not exist, holding src.
func createFile(path string, src []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(src)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return fmt.Errorf("writing %s: %w", path, werr)
	}
	return nil
}

// renderHandlers renders the handler stubs of consumer c of fm, as package pkg.
func renderHandlers(md *model, fm *fileModel, c *consumer, pkg string) ([]byte, error) {
	data := templates.HandlersData{
		Package:   pkg,
		Source:    fm.file.Desc.Path(),
		GenImport: string(fm.file.GoImportPath),
		Service:   c.svc.GoName,
		FullName:  string(c.svc.Desc.FullName()),
	}
	// The names the template declares at package level, and its locals.
	declared := []string{"Handler", "notImplemented", "New" + c.svc.GoName + "Handler", "h", "tx", "msg", "method"}
	pick := newNamer(func(name string) bool { return slices.Contains(declared, name) }).pick
	data.Errors = pick("errors")
	data.GenName = pick(sanitize(string(fm.file.GoPackageName)))
	names := map[protogen.GoImportPath]string{fm.file.GoImportPath: data.GenName}
	for _, h := range slices.Concat(c.handlers, c.timerHandlers) {
		in := h.method.Input.GoIdent
		name, ok := names[in.GoImportPath]
		if !ok {
			name = pick(sanitize(string(md.pkgNames[in.GoImportPath])))
			names[in.GoImportPath] = name
			data.Imports = append(data.Imports, templates.Import{Name: name, Path: string(in.GoImportPath)})
		}
		data.Handlers = append(data.Handlers, templates.HandlerData{Method: h.method.GoName, Input: name + "." + in.GoName, Timer: h.timer != nil})
	}
	for _, t := range c.tables {
		data.Tables = append(data.Tables, t.msg.GoIdent.GoName)
	}
	for _, p := range c.publishes {
		data.Publishes = append(data.Publishes, publishName(p))
	}
	return execute(templates.Handlers, data, data.FullName)
}

// renderMain renders the command of consumer c of fm, whose handlers are
// package pkg at import path handlers.
func renderMain(md *model, fm *fileModel, c *consumer, pkg, handlers string) ([]byte, error) {
	data := templates.MainData{
		Command:  pkg,
		Source:   fm.file.Desc.Path(),
		Service:  c.svc.GoName,
		FullName: string(c.svc.Desc.FullName()),
	}
	// The names the template declares, and its locals.
	declared := []string{"main", "d"}
	pick := newNamer(func(name string) bool { return slices.Contains(declared, name) }).pick
	add := func(path, name string) string {
		unique := pick(sanitize(name))
		imp := templates.Import{Path: path}
		if needsAlias(path, name, unique) {
			imp.Name = unique
		}
		data.Imports = append(data.Imports, imp)
		return unique
	}
	data.GenName = add(string(fm.file.GoImportPath), string(md.pkgNames[fm.file.GoImportPath]))
	data.HandlersName = add(handlers, pkg)
	data.RuntimePkg = add(pathRuntime, "runtime")
	data.RunPkg = add(pathRun, "runconsumer")
	data.RocksPkg = add(pathRocks, "rocks")
	return execute(templates.Main, data, data.FullName)
}

// execute renders tmpl with data, formatted as Go source, as the scaffold
// of consumer name: after its marker.
func execute(tmpl *template.Template, data any, name string) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString(scaffoldMarker(name))
	if err := tmpl.Execute(&buf, data); err != nil {
		return nil, err
	}
	return format.Source(buf.Bytes())
}

// goImportPath returns the Go import path of directory dir (which need not
// exist yet), from the module path in the go.mod of the nearest directory
// at or above it.
func goImportPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for root := abs; ; {
		content, err := os.ReadFile(filepath.Join(root, "go.mod"))
		if err == nil {
			mod, err := modulePath(content)
			if err != nil {
				return "", fmt.Errorf("%s: %w", filepath.Join(root, "go.mod"), err)
			}
			rel, err := filepath.Rel(root, abs)
			if err != nil {
				return "", err
			}
			if rel == "." {
				return mod, nil
			}
			return mod + "/" + filepath.ToSlash(rel), nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", fmt.Errorf("no go.mod at or above %s, to tell the import path of the handlers", abs)
		}
		root = parent
	}
}

// modulePath returns the module path declared by the go.mod content.
func modulePath(content []byte) (string, error) {
	for line := range strings.SplitSeq(string(content), "\n") {
		line, _, _ = strings.Cut(line, "//")
		fields := strings.Fields(line)
		if len(fields) != 2 || fields[0] != "module" {
			continue
		}
		if p, err := strconv.Unquote(fields[1]); err == nil {
			return p, nil
		}
		return fields[1], nil
	}
	return "", errors.New("no module directive")
}
