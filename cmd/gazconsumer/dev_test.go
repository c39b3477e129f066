package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
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
