package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devcerts"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/server"
	"go.uber.org/zap"
)

func freeLoopbackPort(t *testing.T) string {
	t.Helper()
	var l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// gazconsumer etcd serves clients over mutual TLS: a client with a
// certificate of its CA reads and writes; one without is refused.
func TestEtcdServesMutualTLS(t *testing.T) {
	var dir = t.TempDir()
	var ca, err = devcerts.NewCA(dir, "etcd")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue(dir, "etcd-server", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	var clientURL = "https://127.0.0.1:" + freeLoopbackPort(t)
	var ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	var done = make(chan error, 1)
	go func() {
		done <- runEtcd(ctx, &out, etcdFlags{
			name: "e1", dataDir: filepath.Join(dir, "data"),
			listenClient: []string{clientURL}, listenPeer: []string{"http://127.0.0.1:" + freeLoopbackPort(t)},
			initialClusterState: "new", certFile: pair.CertFile, keyFile: pair.KeyFile, trustedCAFile: ca.CertFile,
			logLevel: "error",
		})
	}()

	var dial = func(cert, key string) *clientv3.Client {
		var cfg, err = server.BuildTLSConfig(cert, key, ca.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL}, TLS: cfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	var good = dial(pair.CertFile, pair.KeyFile)
	var deadline = time.Now().Add(time.Minute)
	for {
		var putCtx, cancelPut = context.WithTimeout(ctx, 2*time.Second)
		_, err = good.Put(putCtx, "k", "v")
		cancelPut()
		if err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("putting with a client certificate: %v\n%s", err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var getCtx, cancelGet = context.WithTimeout(ctx, 2*time.Second)
	defer cancelGet()
	if _, err = dial("", "").Get(getCtx, "k"); err == nil {
		t.Error("a client without a certificate read from etcd")
	}
	if !strings.Contains(out.String(), "member e1 serving clients on "+clientURL) {
		t.Errorf("output: %s", out.String())
	}
	cancel()
	if err = <-done; err != nil {
		t.Fatalf("runEtcd: %v", err)
	}

	// Bad flags are refused, naming the flag.
	for _, tc := range []struct {
		f    etcdFlags
		want string
	}{
		{etcdFlags{}, "--data-dir is required"},
		{etcdFlags{dataDir: dir, listenClient: []string{"127.0.0.1:1"}}, "--listen-client-urls"},
		{etcdFlags{dataDir: dir, listenClient: []string{clientURL}, listenPeer: []string{"http://127.0.0.1:1"}, initialClusterState: "maybe"}, "--initial-cluster-state"},
	} {
		if err := runEtcd(context.Background(), &out, tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("runEtcd(%+v) = %v, want an error naming %q", tc.f, err, tc.want)
		}
	}
}

// A log format etcd does not know fails the command before etcd starts.
func TestEtcdRefusesUnknownLogFormat(t *testing.T) {
	var err = runEtcd(context.Background(), io.Discard, etcdFlags{name: "e1", dataDir: t.TempDir(), initialClusterState: "new", logLevel: "warn", logFormat: "xml"})
	if err == nil || !strings.Contains(err.Error(), "--log-format") || !strings.Contains(err.Error(), `"xml"`) {
		t.Fatalf("runEtcd with --log-format xml: %v", err)
	}
}
