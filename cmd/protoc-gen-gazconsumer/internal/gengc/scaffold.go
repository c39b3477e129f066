package gengc

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/gazconsumer/gazconsumer/templates"
)

// scaffold writes the handler stubs of each consumer of md into a
// subdirectory of dir named for the consumer, unless the stub file exists.
// It returns the paths written.
func scaffold(md *model, dir string) ([]string, error) {
	var written []string
	for _, fm := range md.files {
		for _, c := range fm.consumers {
			pkg := strings.ToLower(c.svc.GoName)
			path := filepath.Join(dir, pkg, "handlers.go")
			if _, err := os.Stat(path); err == nil {
				continue // Written before: it is the user's now.
			} else if !errors.Is(err, fs.ErrNotExist) {
				return written, fmt.Errorf("scaffolding %s: %w", c.svc.Desc.FullName(), err)
			}
			src, err := renderHandlers(md, fm, c, pkg)
			if err != nil {
				return written, fmt.Errorf("scaffolding %s: %w", c.svc.Desc.FullName(), err)
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return written, fmt.Errorf("scaffolding %s: %w", c.svc.Desc.FullName(), err)
			}
			// O_EXCL: never overwrite, even a file created since the Stat.
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if errors.Is(err, fs.ErrExist) {
				continue
			} else if err != nil {
				return written, fmt.Errorf("scaffolding %s: %w", c.svc.Desc.FullName(), err)
			}
			_, werr := f.Write(src)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				return written, fmt.Errorf("scaffolding %s: writing %s: %w", c.svc.Desc.FullName(), path, werr)
			}
			written = append(written, path)
		}
	}
	return written, nil
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
	taken := map[string]bool{gen: true, pkg: true}
	for _, h := range c.handlers {
		in := h.method.Input.GoIdent
		name, ok := names[string(in.GoImportPath)]
		if !ok {
			base := cleanIdent(string(md.pkgNames[in.GoImportPath]))
			name = base
			for i := 1; taken[name]; i++ {
				name = fmt.Sprintf("%s%d", base, i)
			}
			taken[name] = true
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
	var buf bytes.Buffer
	if err := templates.Handlers.Execute(&buf, data); err != nil {
		return nil, err
	}
	return format.Source(buf.Bytes())
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
