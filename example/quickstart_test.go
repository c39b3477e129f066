package example_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// block is a fenced code block of the README's quick start.
type block struct {
	lang  string
	attrs map[string]string // Words of the info string after the language: key=value, or a flag.
	text  string
	line  int // Of the opening fence in README.md.
}

// quickStart returns the code blocks of the README's quick start section.
func quickStart(t *testing.T) []block {
	t.Helper()
	var readme, err = os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []block
	var in, open bool
	var cur block
	var body strings.Builder
	var sc = bufio.NewScanner(bytes.NewReader(readme))
	for n := 1; sc.Scan(); n++ {
		var line = sc.Text()
		switch {
		case !open && strings.HasPrefix(line, "## "):
			in = strings.HasPrefix(line, "## Quick start")
		case in && !open && strings.HasPrefix(line, "```"):
			var words = strings.Fields(strings.TrimPrefix(line, "```"))
			cur = block{attrs: map[string]string{}, line: n}
			if len(words) != 0 {
				cur.lang = words[0]
				for _, w := range words[1:] {
					var k, v, _ = strings.Cut(w, "=")
					cur.attrs[k] = v
				}
			}
			open = true
			body.Reset()
		case in && open && line == "```":
			cur.text = body.String()
			blocks = append(blocks, cur)
			open = false
		case in && open:
			body.WriteString(line + "\n")
		}
	}
	if len(blocks) == 0 {
		t.Fatal("README.md has no quick start section with code blocks")
	}
	return blocks
}

// TestQuickStart follows the README's quick start to the letter in a new
// module: it writes the files it shows, runs its commands (those a reader
// leaves running, in the background) and checks that the consumer
// publishes the totals the README shows. Its only liberties: a replace
// directive of github.com/gazconsumer/gazconsumer to this checkout after
// `go mod init`, and a free port in place of 9000. Modules are downloaded
// from the user's module proxy (see proxyForReplaced): the test relies on
// nothing an earlier build left in the module cache.
func TestQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module and runs a stack")
	}
	var repo, err = filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err = os.Stat(filepath.Join(repo, ".tools/bin/buf")); err != nil {
		t.Fatalf("buf is not installed (run scripts/setup.sh): %v", err)
	}
	var ctx, cancel = context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	var dir = t.TempDir()
	var port = freePort(t)
	var env = append(os.Environ(),
		"PATH="+filepath.Join(repo, ".tools/bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local", "GOPROXY="+proxyForReplaced(t),
	)
	// Variables a user's shell would not have set.
	env = append(env, "BROKER_ADDRESS=", "ETCD_ADDRESS=", "CONSUMER_ADDRESS=", "CONSUMER_PORT=")

	var background []*exec.Cmd
	defer func() {
		for i := len(background) - 1; i >= 0; i-- {
			var cmd = background[i]
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			var done = make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(time.Minute):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
				t.Errorf("README.md:%d did not stop on SIGTERM", i)
			}
			if t.Failed() {
				t.Logf("background block %q logged:\n%s", cmd.Args[len(cmd.Args)-1], cmd.Stdout)
			}
		}
	}()
	var script = func(b block) string {
		var text = strings.ReplaceAll(b.text, "9000", port)
		// The liberty: resolve gazconsumer to this checkout.
		return regexp.MustCompile(`(?m)^(go mod init .*)$`).ReplaceAllString(text,
			"$1\ngo mod edit -replace github.com/gazconsumer/gazconsumer="+repo)
	}
	var run = func(b block) ([]byte, error) {
		var cmd = exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", script(b))
		cmd.Dir, cmd.Env = dir, env
		return cmd.CombinedOutput()
	}

	var blocks = quickStart(t)
	var ranSh, wrote, replaced, started, checked int
	for i, b := range blocks {
		switch {
		case b.attrs["file"] != "":
			var path = filepath.Join(dir, filepath.FromSlash(b.attrs["file"]))
			if err = os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err = os.WriteFile(path, []byte(b.text), 0o644); err != nil {
				t.Fatal(err)
			}
			wrote++

		case b.attrs["replace"] != "":
			var file, fn, _ = strings.Cut(b.attrs["replace"], ":")
			replaceFunc(t, filepath.Join(dir, filepath.FromSlash(file)), fn, b.text)
			replaced++

		case b.lang == "sh" && hasAttr(b, "background"):
			var cmd = exec.Command("bash", "-e", "-c", script(b))
			cmd.Dir, cmd.Env = dir, env
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var log = new(bytes.Buffer)
			cmd.Stdout, cmd.Stderr = log, log
			if err = cmd.Start(); err != nil {
				t.Fatal(err)
			}
			background = append(background, cmd)
			waitReady(ctx, t, dir, strings.ReplaceAll(b.attrs["ready"], "9000", port), b, log)
			started++

		case b.lang == "sh" && hasAttr(b, "until-output"):
			if i+1 == len(blocks) || !hasAttr(blocks[i+1], "output") {
				t.Fatalf("README.md:%d: an until-output block must be followed by an output block", b.line)
			}
			// Run it until it prints what the README shows, for up to a minute.
			var want = strings.Join(jsonLines(blocks[i+1].text), "\n")
			var deadline = time.Now().Add(time.Minute)
			for {
				var out, err = run(b)
				var got = strings.Join(jsonLines(string(out)), "\n")
				if err == nil && got == want {
					break
				} else if time.Now().After(deadline) {
					t.Fatalf("README.md:%d printed (%v):\n%s\nwhich, without UUIDs and acknowledgements, is\n%s\nnot\n%s", b.line, err, out, got, want)
				}
				time.Sleep(250 * time.Millisecond)
			}
			checked++

		case b.lang == "sh":
			if out, err := run(b); err != nil {
				t.Fatalf("README.md:%d: %v\n%s", b.line, err, out)
			}
			ranSh++
			if ranSh == 2 { // After buf generate: the scaffold is there.
				for _, f := range []string{"internal/spendcounter/handlers.go", "cmd/spendcounter/main.go", "gen/acme/shop/v1/shop_gazconsumer.pb.go"} {
					if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
						t.Errorf("after README.md:%d, %s is missing: %v", b.line, f, err)
					}
				}
			}
		}
	}
	if wrote == 0 || replaced != 1 || started != 2 || checked != 1 || ranSh < 4 {
		t.Errorf("the quick start wrote %d files, filled %d handlers, started %d background and ran %d foreground commands, and checked %d outputs",
			wrote, replaced, started, ranSh, checked)
	}
}

// proxyForReplaced returns the GOPROXY of the user's go command, amended
// for the one liberty the test takes, the replace directive: go get looks up
// the paths of the replaced module's packages as modules of their own on
// the proxy, which has none of them and may answer so with an error other
// than "not found" (403). Each proxy falls through to the next on any
// error, and the list ends in off, so that such a lookup ends as one of a
// module that does not exist; "direct" is left out (no version control
// host is reached from here). Every other module is downloaded from the
// user's proxies, as they are.
func proxyForReplaced(t *testing.T) string {
	t.Helper()
	var out, err = exec.Command("go", "env", "GOPROXY").Output()
	if err != nil {
		t.Fatalf("go env GOPROXY: %v", err)
	}
	var proxies []string
	for _, p := range strings.FieldsFunc(strings.TrimSpace(string(out)), func(r rune) bool { return r == ',' || r == '|' }) {
		if p != "direct" && p != "off" {
			proxies = append(proxies, p)
		}
	}
	return strings.Join(append(proxies, "off"), "|")
}

func hasAttr(b block, name string) bool {
	var _, ok = b.attrs[name]
	return ok
}

// replaceFunc replaces, in the Go file at path, function fn and its doc
// comment with src.
func replaceFunc(t *testing.T, path, fn, src string) {
	t.Helper()
	var content, err = os.ReadFile(path)
	if err != nil {
		t.Fatalf("the handler to fill in: %v", err)
	}
	var fset = token.NewFileSet()
	f, err := parser.ParseFile(fset, path, content, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == fn {
			var begin = fset.Position(fd.Pos()).Offset
			if fd.Doc != nil {
				begin = fset.Position(fd.Doc.Pos()).Offset
			}
			var end = fset.Position(fd.End()).Offset
			var out = string(content[:begin]) + strings.TrimSuffix(src, "\n") + string(content[end:])
			if err = os.WriteFile(path, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("%s has no function %s to fill in", path, fn)
}

// jsonLines returns each JSON object line of out, without its uuid, but
// none holding only a uuid (acknowledgements), re-encoded canonically.
func jsonLines(out string) []string {
	var lines []string
	for line := range strings.SplitSeq(out, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue // Not a message: gazctl's logging.
		}
		delete(m, "uuid")
		if len(m) == 0 {
			continue
		}
		var b, _ = json.Marshal(m)
		lines = append(lines, string(b))
	}
	return lines
}

// waitReady waits for a background block's ready condition: a file to be
// written, or a :port to accept connections.
func waitReady(ctx context.Context, t *testing.T, dir, ready string, b block, log *bytes.Buffer) {
	t.Helper()
	for {
		var ok bool
		if port, isPort := strings.CutPrefix(ready, ":"); isPort {
			if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second); err == nil {
				conn.Close()
				ok = true
			}
		} else if st, err := os.Stat(filepath.Join(dir, ready)); err == nil && st.Size() != 0 {
			ok = true
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("README.md:%d: not ready (%s):\n%s", b.line, ready, log)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
