package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestDevPrintsGazctlEnvironmentAndStops(t *testing.T) {
	var dir = t.TempDir()
	var envFile = filepath.Join(dir, "env")
	var ctx, cancel = context.WithCancel(context.Background())
	defer cancel()

	var out bytes.Buffer
	var done = make(chan error, 1)
	go func() {
		done <- runDev(ctx, &out, devFlags{
			dir:      filepath.Join(dir, "stack"),
			brokers:  1,
			journals: []string{"../../scripts/demo-journals.yaml"},
			logLevel: "warn",
			envFile:  envFile,
		})
	}()

	var deadline = time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(envFile); err == nil && len(b) != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("gazconsumer dev did not write its environment")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runDev: %v", err)
	}
	for _, want := range []string{"export BROKER_ADDRESS=http://127.0.0.1:", "export ETCD_ADDRESS=http://127.0.0.1:", "broker-0", "stopping"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// Consumers read ETCD_PREFIX as their own prefix: the brokers' must not leak into it.
	if strings.Contains(out.String(), "ETCD_PREFIX") {
		t.Errorf("the environment sets ETCD_PREFIX, which consumers would take for theirs:\n%s", out.String())
	}
}

func TestDevRejectsBadJournalSpecs(t *testing.T) {
	var dir = t.TempDir()
	var specs = filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(specs, []byte("name: bad/\nreplication: 1\nfragment: {length: 7, stores: [file:///]}\nchildren:\n  - name: bad/one\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var err = runDev(context.Background(), &bytes.Buffer{}, devFlags{
		dir: filepath.Join(dir, "stack"), brokers: 1, journals: []string{specs}, logLevel: "warn",
	})
	if err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "bad/one") || !strings.Contains(err.Error(), "Length") {
		t.Fatalf("got %v; want an error naming the file, the journal and the field", err)
	}
}

// With --tls and --auth-keys, etcd and the brokers serve mutual TLS and
// verify Gazette's authorization, and the environment printed is all gazctl
// needs: without its certificate or its keys, gazctl is refused.
func TestDevSecured(t *testing.T) {
	var gazctl, err = filepath.Abs("../../.tools/bin/gazctl")
	if err != nil {
		t.Fatal(err)
	} else if _, err = os.Stat(gazctl); err != nil {
		t.Fatalf("gazctl is not installed (run scripts/setup.sh): %v", err)
	}
	var dir = t.TempDir()
	var envFile = filepath.Join(dir, "env")
	var ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	var done = make(chan error, 1)
	go func() {
		done <- runDev(ctx, &out, devFlags{
			dir: filepath.Join(dir, "stack"), brokers: 1, brokerPort: 0,
			journals: []string{"../../scripts/demo-journals.yaml"},
			logLevel: "warn", envFile: envFile, tls: true, authKeys: "generate",
		})
	}()
	var deadline = time.Now().Add(time.Minute)
	var env []string
	for {
		if b, err := os.ReadFile(envFile); err == nil && len(b) != 0 {
			for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
				env = append(env, strings.TrimPrefix(line, "export "))
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gazconsumer dev did not write its environment:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []string{"BROKER_ADDRESS=https://127.0.0.1:", "ETCD_ADDRESS=https://127.0.0.1:", "BROKER_AUTH_KEYS=", "CONSUMER_AUTH_KEYS=", "BROKER_TRUSTED_CA_FILE=", "CONSUMER_SERVER_CA_FILE="} {
		if !strings.Contains(strings.Join(env, "\n"), want) {
			t.Errorf("the environment lacks %s:\n%s", want, strings.Join(env, "\n"))
		}
	}

	// list runs gazctl journals list with the environment, less the
	// variables named by drop, for up to timeout.
	var list = func(timeout time.Duration, drop ...string) (string, error) {
		var cmdEnv []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "BROKER_") && !strings.HasPrefix(kv, "ETCD_") && !strings.HasPrefix(kv, "CONSUMER_") {
				cmdEnv = append(cmdEnv, kv)
			}
		}
	next:
		for _, kv := range env {
			for _, d := range drop {
				if strings.HasPrefix(kv, d+"=") {
					continue next
				}
			}
			cmdEnv = append(cmdEnv, kv)
		}
		var listCtx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
		var cmd = exec.CommandContext(listCtx, gazctl, "journals", "list", "--broker.cache.size", "0")
		cmd.Env = cmdEnv
		var b, err = cmd.CombinedOutput()
		return string(b), err
	}
	if got, err := list(time.Minute); err != nil || !strings.Contains(got, "demo/") {
		t.Errorf("gazctl journals list with the environment: %v\n%s", err, got)
	}
	if got, err := list(time.Minute, "BROKER_AUTH_KEYS"); err == nil || !strings.Contains(got, "Unauthenticated") {
		t.Errorf("gazctl journals list without the keys: %v\n%s", err, got)
	}
	// gazctl retries a failed handshake until it's stopped.
	if got, err := list(3*time.Second, "BROKER_CERT_FILE", "BROKER_CERT_KEY_FILE"); err == nil {
		t.Errorf("gazctl journals list without a client certificate succeeded:\n%s", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runDev: %v", err)
	}
}

// With --log-format json, the stack logs a JSON object a line (etcd's and
// Gazette's logs included); a format it does not know fails it at once.
func TestDevLogFormat(t *testing.T) {
	var dir = t.TempDir()
	if err := runDev(context.Background(), io.Discard, devFlags{dir: dir, brokers: 1, logLevel: "info", logFormat: "xml"}); err == nil ||
		!strings.Contains(err.Error(), "--log-format") || !strings.Contains(err.Error(), `"xml"`) {
		t.Fatalf("runDev with --log-format xml: %v", err)
	}

	var logs lockedBuffer
	logOutput = &logs
	defer func() { logOutput = os.Stderr; slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil))) }()
	var envFile = filepath.Join(dir, "env")
	var ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var done = make(chan error, 1)
	go func() {
		done <- runDev(ctx, io.Discard, devFlags{dir: filepath.Join(dir, "stack"), brokers: 1, brokerPort: 0, logLevel: "info", logFormat: "json", envFile: envFile})
	}()
	for deadline := time.Now().Add(time.Minute); ; {
		if b, err := os.ReadFile(envFile); err == nil && len(b) != 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatal("gazconsumer dev did not write its environment")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runDev: %v", err)
	}
	var lines = strings.Split(strings.TrimSuffix(logs.String(), "\n"), "\n")
	if !strings.Contains(logs.String(), `"msg":"gazconsumer dev: the stack is running"`) {
		t.Fatalf("it logged %q", logs.String())
	}
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil || v["msg"] == nil || v["level"] == nil {
			t.Errorf("line %q is not a JSON log record: %v", l, err)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
