package gengc

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"
	"google.golang.org/protobuf/compiler/protogen"
)

// fileCtx builds one generated Go file. It records the packages the file's
// code refers to, whose names it picks once the code is built: names of
// their own where they can, avoiding the names of the file's package
// (those of protoc-gen-go included), the locals of the file's code, Go's
// keywords and predeclared identifiers, and each other.
type fileCtx struct {
	jf     *jen.File
	path   string // Of the file's package.
	pkg    *scope
	locals []string
	md     *model
	paths  map[string]bool
}

func newFileCtx(md *model, path, pkgName string, pkg *scope, locals []string) *fileCtx {
	jf := jen.NewFilePathName(path, pkgName)
	jf.HeaderComment(Header)
	return &fileCtx{jf: jf, path: path, pkg: pkg, locals: locals, md: md, paths: map[string]bool{}}
}

// q returns the qualified identifier name of the package of import path p.
func (fc *fileCtx) q(p, name string) *jen.Statement {
	fc.paths[p] = true
	return jen.Qual(p, name)
}

// ident returns the qualified identifier of id.
func (fc *fileCtx) ident(id protogen.GoIdent) *jen.Statement {
	return fc.q(string(id.GoImportPath), id.GoName)
}

// packageNames are the names of the packages generated code imports: the
// name each declares, and the name the generated code prefers for it.
var packageNames = map[string][2]string{
	pathFmt:          {"fmt", "fmt"},
	pathIO:           {"io", "io"},
	pathBufio:        {"bufio", "bufio"},
	pathTime:         {"time", "time"},
	pathTesting:      {"testing", "testing"},
	pathProtojson:    {"protojson", "protojson"},
	pathProtowire:    {"protowire", "protowire"},
	pathTimestamp:    {"timestamppb", "timestamppb"},
	pathMessage:      {"message", "message"},
	pathPB:           {"protocol", "pb"},
	pathPC:           {"protocol", "pc"},
	pathRuntime:      {"runtime", "runtime"},
	pathTable:        {"table", "table"},
	pathKeyenc:       {"keyenc", "keyenc"},
	pathCodec:        {"codec", "codec"},
	pathGCv1:         {"gazconsumerv1", "gazconsumerv1"},
	pathConsumertest: {"consumertest", "consumertest"},
	pathProducer:     {"producer", "producer"},
	pathQuery:        {"query", "query"},
	pathContext:      {"context", "context"},
	pathGRPC:         {"grpc", "grpc"},
}

// importNames picks the names of the packages the file imports, and tells
// jennifer.
func (fc *fileCtx) importNames() {
	var paths []string
	for p := range fc.paths {
		if p != fc.path {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	names := newNamer(func(name string) bool { return fc.pkg.has(name) || slices.Contains(fc.locals, name) })
	for _, p := range paths {
		declared, preferred := string(fc.md.pkgNames[protogen.GoImportPath(p)]), ""
		if names, ok := packageNames[p]; ok {
			declared, preferred = names[0], names[1]
		}
		if preferred == "" {
			preferred = sanitize(declared)
		}
		name := names.pick(preferred)
		if needsAlias(p, declared, name) {
			fc.jf.ImportAlias(p, name)
		} else {
			fc.jf.ImportName(p, name)
		}
	}
}

// docWidth is the width of the text of generated doc comments.
const docWidth = 77

// wrap wraps text into lines of at most docWidth characters, but for words
// longer than that. Its newlines are kept.
func wrap(text string) []string {
	var lines []string
	for _, para := range strings.Split(text, "\n") {
		var line string
		for _, word := range strings.Fields(para) {
			if line != "" && len(line)+1+len(word) > docWidth {
				lines = append(lines, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += word
		}
		lines = append(lines, line)
	}
	return lines
}

// commentText returns the leading comments cs, or fallback if there are none.
func commentText(cs protogen.CommentSet, fallback string) string {
	if t := strings.TrimSpace(string(cs.Leading)); t != "" {
		return t
	}
	return fallback
}

// commentLines returns text as comment lines.
func commentLines(text string) []jen.Code {
	var out []jen.Code
	for _, line := range strings.Split(text, "\n") {
		out = append(out, jen.Comment(strings.TrimPrefix(line, " ")))
	}
	return out
}

// comments writes the leading comments cs, as written, or fallback if
// there are none.
func (fc *fileCtx) comments(cs protogen.CommentSet, fallback string) {
	for _, c := range commentLines(commentText(cs, fallback)) {
		fc.jf.Add(c)
	}
}

// multiLine is a composite literal of one element a line.
var multiLine = jen.Options{Open: "{", Close: "}", Separator: ",", Multi: true}

// doc writes a doc comment, wrapped.
func (fc *fileCtx) doc(format string, args ...any) {
	for _, line := range wrap(fmt.Sprintf(format, args...)) {
		fc.jf.Comment(line)
	}
}

// render renders the file of fc, once its code is built.
func render(fc *fileCtx) ([]byte, error) {
	fc.importNames()
	var buf bytes.Buffer
	if err := fc.jf.Render(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
