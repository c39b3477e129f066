package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devcerts"
	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"github.com/gazconsumer/gazconsumer/internal/clientflags"
	"go.gazette.dev/core/server"
)

// consoleURL waits until out prints the console's URL, and returns it.
func consoleURL(t *testing.T, out *lockedBuffer, done <-chan error) string {
	t.Helper()
	var re = regexp.MustCompile(`(http://127\.0\.0\.1:\d+)/`)
	for deadline := time.Now().Add(time.Minute); ; {
		if m := re.FindStringSubmatch(out.String()); m != nil && strings.Contains(out.String(), "console") {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("it stopped: %v\n%s", err, out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no console URL printed:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// getPage GETs url, and returns its status and body.
func getPage(t *testing.T, url string) (int, string) {
	t.Helper()
	var resp, err = http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b, _ = io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// gazconsumer console serves the console of the deployment its flags
// reach, until it is stopped; flags that go together fail it at once.
func TestConsoleCommandServesADeployment(t *testing.T) {
	var stack = devstacktest.StartT(t, devstacktest.Journals("console", 2, 1<<20))
	var ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var flags = consoleFlags{
		Flags:  clientflags.Flags{EtcdAddress: stack.EtcdURL(), BrokerAddress: string(stack.Brokers()[0].Endpoint())},
		listen: "127.0.0.1:0", root: "/gazette/consumers/", interval: time.Second,
	}
	var out lockedBuffer
	var done = make(chan error, 1)
	go func() { done <- runConsole(ctx, &out, flags) }()
	var url = consoleURL(t, &out, done)

	if code, page := getPage(t, url+"/"); code != http.StatusOK || !strings.Contains(page, "No consumer group in etcd") {
		t.Errorf("the consumers page: %d\n%s", code, page)
	}
	if code, page := getPage(t, url+"/journals"); code != http.StatusOK || !strings.Contains(page, `data-journal="console/01"`) {
		t.Errorf("the journals page: %d\n%s", code, page)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runConsole: %v", err)
	}

	flags.members.CertFile = "client.crt"
	if err := runConsole(context.Background(), io.Discard, flags); err == nil || !strings.Contains(err.Error(), "--consumer.cert-file and --consumer.cert-key-file go together") {
		t.Fatalf("a certificate without its key: %v", err)
	}
}

// gazconsumer dev --tls --auth-keys generate starts a console and prints
// its URL; the console reaches the secured brokers with the stack's
// certificate and keys.
func TestDevConsoleOfSecuredStack(t *testing.T) {
	var dir = t.TempDir()
	var ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var out lockedBuffer
	var done = make(chan error, 1)
	go func() {
		done <- runDev(ctx, &out, devFlags{
			dir: filepath.Join(dir, "stack"), brokers: 1, brokerPort: 0, consolePort: 0,
			journals: []string{"../../scripts/demo-journals.yaml"}, logLevel: "warn", tls: true, authKeys: "generate",
			envFile: filepath.Join(dir, "env"),
		})
	}()
	var url = consoleURL(t, &out, done)
	if !strings.Contains(out.String(), "  console: "+url+"/") {
		t.Errorf("the console's URL is not printed with the stack's addresses:\n%s", out.String())
	}
	if code, page := getPage(t, url+"/journals"); code != http.StatusOK || !strings.Contains(page, `data-journal="demo/greetings"`) || strings.Contains(page, `class="error"`) {
		t.Errorf("the journals page of the secured stack: %d\n%s", code, page)
	}
	if code, page := getPage(t, url+"/"); code != http.StatusOK || !strings.Contains(page, "<h1>Consumers</h1>") {
		t.Errorf("the consumers page: %d\n%s", code, page)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runDev: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "env")); err != nil {
		t.Fatal(err)
	}
}

// With --tls.*, the console serves HTTPS, and only to clients whose
// certificates its client CA signed.
func TestConsoleServesHTTPSToClientsWithCertificates(t *testing.T) {
	var stack = devstacktest.StartT(t, devstacktest.Journals("console", 1, 1<<20))
	var dir = t.TempDir()
	var ca, err = devcerts.NewCA(dir, "console")
	if err != nil {
		t.Fatal(err)
	}
	serving, err := ca.Issue(dir, "console", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(dir, "operator", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	var ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	var flags = consoleFlags{
		Flags:  clientflags.Flags{EtcdAddress: stack.EtcdURL(), BrokerAddress: string(stack.Brokers()[0].Endpoint())},
		listen: "127.0.0.1:0", root: "/gazette/consumers/", interval: time.Second,
		certFile: serving.CertFile, keyFile: serving.KeyFile, clientCAFile: ca.CertFile,
	}
	var out lockedBuffer
	var done = make(chan error, 1)
	go func() { done <- runConsole(ctx, &out, flags) }()
	var re = regexp.MustCompile(`https://(127\.0\.0\.1:\d+)/`)
	var addr string
	for deadline := time.Now().Add(time.Minute); addr == ""; {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no https URL printed:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	var get = func(pair *devcerts.Pair) (int, error) {
		var cfg, err = server.BuildTLSConfig("", "", ca.CertFile)
		if err != nil {
			t.Fatal(err)
		}
		if pair != nil {
			var cert, err = tls.LoadX509KeyPair(pair.CertFile, pair.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		var c = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 30 * time.Second}
		resp, err := c.Get("https://" + addr + "/journals")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(&client); err != nil || code != http.StatusOK {
		t.Errorf("a client with a certificate: %d, %v", code, err)
	}
	if _, err := get(nil); err == nil {
		t.Errorf("a client without a certificate was served")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("runConsole: %v", err)
	}

	flags.keyFile = ""
	if err := runConsole(context.Background(), io.Discard, flags); err == nil || !strings.Contains(err.Error(), "--tls.cert-file and --tls.key-file go together") {
		t.Fatalf("a certificate without its key: %v", err)
	}
}
