package gengc

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"go/token"
	"io/fs"
	"os"
	pathpkg "path"
	"path/filepath"
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
// package of handlers, or the directory of another consumer's.
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
			pkg := strings.ToLower(c.svc.GoName)
			p := optPos(c.svc.Desc)
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
		}
	}
	return sc, nil
}

// write writes the scaffolds, but those whose file exists. It returns the
// paths written.
func (sc *scaffolds) write() ([]string, error) {
	var written []string
	for _, fm := range sc.md.files {
		for _, c := range fm.consumers {
			pkg := sc.pkgs[c]
			wrote, err := writeOnce(filepath.Join(sc.opts.ScaffoldDir, pkg, "handlers.go"), func() ([]byte, error) {
				return renderHandlers(sc.md, fm, c, pkg)
			})
			if err != nil {
				return written, fmt.Errorf("scaffolding %s: %w", c.svc.Desc.FullName(), err)
			} else if wrote != "" {
				written = append(written, wrote)
			}
			if sc.opts.ScaffoldMainDir == "" {
				continue
			}
			wrote, err = writeOnce(filepath.Join(sc.opts.ScaffoldMainDir, pkg, "main.go"), func() ([]byte, error) {
				return renderMain(sc.md, fm, c, pkg, sc.handlersImport+"/"+pkg)
			})
			if err != nil {
				return written, fmt.Errorf("scaffolding the command of %s: %w", c.svc.Desc.FullName(), err)
			} else if wrote != "" {
				written = append(written, wrote)
			}
		}
	}
	return written, nil
}

// writeOnce writes the file at path with the content render returns, unless
// the file exists: once written, it is the user's. It returns path if it
// wrote it, and "" if the file existed.
func writeOnce(path string, render func() ([]byte, error)) (string, error) {
	if _, err := os.Stat(path); err == nil {
		return "", nil // Written before: it is the user's now.
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	src, err := render()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	// O_EXCL: never overwrite, even a file created since the Stat.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return "", nil
	} else if err != nil {
		return "", err
	}
	_, werr := f.Write(src)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return "", fmt.Errorf("writing %s: %w", path, werr)
	}
	return path, nil
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
	chosen := map[string]bool{}
	taken := func(name string) bool { return chosen[name] || slices.Contains(declared, name) || isReserved(name) }
	pick := func(name string) string {
		unique := uniqueName(name, taken)
		chosen[unique] = true
		return unique
	}
	data.Errors = pick("errors")
	data.GenName = pick(sanitize(string(fm.file.GoPackageName)))
	names := map[protogen.GoImportPath]string{fm.file.GoImportPath: data.GenName}
	for _, h := range c.handlers {
		in := h.method.Input.GoIdent
		name, ok := names[in.GoImportPath]
		if !ok {
			name = pick(sanitize(string(md.pkgNames[in.GoImportPath])))
			names[in.GoImportPath] = name
			data.Imports = append(data.Imports, templates.Import{Name: name, Path: string(in.GoImportPath)})
		}
		data.Handlers = append(data.Handlers, templates.HandlerData{Method: h.method.GoName, Input: name + "." + in.GoName})
	}
	for _, t := range c.tables {
		data.Tables = append(data.Tables, t.msg.GoIdent.GoName)
	}
	for _, p := range c.publishes {
		data.Publishes = append(data.Publishes, publishName(p))
	}
	return execute(templates.Handlers, data)
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
	chosen := map[string]bool{}
	taken := func(name string) bool { return chosen[name] || slices.Contains(declared, name) || isReserved(name) }
	add := func(path, name string) string {
		unique := uniqueName(sanitize(name), taken)
		chosen[unique] = true
		imp := templates.Import{Path: path}
		if unique != name || unique != pathpkg.Base(path) {
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
	return execute(templates.Main, data)
}

// execute renders tmpl with data, formatted as Go source.
func execute(tmpl *template.Template, data any) ([]byte, error) {
	var buf bytes.Buffer
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
