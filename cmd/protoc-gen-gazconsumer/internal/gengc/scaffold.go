package gengc

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	pathpkg "path"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"unicode"

	"github.com/gazconsumer/gazconsumer/templates"
)

// Import paths of the packages a scaffolded command uses.
const (
	pathRun   = "github.com/gazconsumer/gazconsumer/runtime/runconsumer"
	pathRocks = "github.com/gazconsumer/gazconsumer/store/rocks"
)

// scaffold writes the handler stubs of each consumer of md into a
// subdirectory of opts.ScaffoldDir named for the consumer and, if
// opts.ScaffoldMainDir is set, its command into a subdirectory of that,
// unless the file exists. It returns the paths written.
func scaffold(md *model, opts Options) ([]string, error) {
	if opts.ScaffoldMainDir != "" && opts.ScaffoldDir == "" {
		return nil, errors.New("option scaffold_main needs option scaffold too: the command it writes imports the handlers")
	}
	var handlersImport string
	if opts.ScaffoldMainDir != "" {
		var err error
		if handlersImport, err = goImportPath(opts.ScaffoldDir); err != nil {
			return nil, fmt.Errorf("option scaffold_main: %w", err)
		}
	}
	var written []string
	for _, fm := range md.files {
		for _, c := range fm.consumers {
			pkg := strings.ToLower(c.svc.GoName)
			wrote, err := writeOnce(filepath.Join(opts.ScaffoldDir, pkg, "handlers.go"), func() ([]byte, error) {
				return renderHandlers(md, fm, c, pkg)
			})
			if err != nil {
				return written, fmt.Errorf("scaffolding %s: %w", c.svc.Desc.FullName(), err)
			} else if wrote != "" {
				written = append(written, wrote)
			}
			if opts.ScaffoldMainDir == "" {
				continue
			}
			wrote, err = writeOnce(filepath.Join(opts.ScaffoldMainDir, pkg, "main.go"), func() ([]byte, error) {
				return renderMain(fm, c, pkg, handlersImport+"/"+pkg)
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
	gen := string(fm.file.GoPackageName)
	data := templates.HandlersData{
		Package:   pkg,
		Source:    fm.file.Desc.Path(),
		GenImport: string(fm.file.GoImportPath),
		GenName:   gen,
		Service:   c.svc.GoName,
		FullName:  string(c.svc.Desc.FullName()),
	}
	names := map[string]string{string(fm.file.GoImportPath): gen}
	// The names the template declares at package level.
	taken := map[string]bool{gen: true, pkg: true, "Handler": true, "notImplemented": true, "New" + c.svc.GoName + "Handler": true}
	data.Errors = uniqueName("errors", taken)
	for _, h := range c.handlers {
		in := h.method.Input.GoIdent
		name, ok := names[string(in.GoImportPath)]
		if !ok {
			name = uniqueName(cleanIdent(string(md.pkgNames[in.GoImportPath])), taken)
			names[string(in.GoImportPath)] = name
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
func renderMain(fm *fileModel, c *consumer, pkg, handlers string) ([]byte, error) {
	data := templates.MainData{
		Command:  pkg,
		Source:   fm.file.Desc.Path(),
		Service:  c.svc.GoName,
		FullName: string(c.svc.Desc.FullName()),
	}
	// The names the template declares.
	taken := map[string]bool{"main": true}
	add := func(path, name string) string {
		unique := uniqueName(name, taken)
		imp := templates.Import{Path: path}
		if unique != pathpkg.Base(path) {
			imp.Name = unique
		}
		data.Imports = append(data.Imports, imp)
		return unique
	}
	data.GenName = add(string(fm.file.GoImportPath), string(fm.file.GoPackageName))
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

// uniqueName returns name, or name followed by the smallest number making
// it not taken, and takes it.
func uniqueName(name string, taken map[string]bool) string {
	unique := name
	for i := 1; taken[unique]; i++ {
		unique = fmt.Sprintf("%s%d", name, i)
	}
	taken[unique] = true
	return unique
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

// cleanIdent turns s into a Go identifier.
func cleanIdent(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) && b.Len() != 0 {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "pkg"
	}
	return b.String()
}
