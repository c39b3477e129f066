package devstack_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc/metadata"
)

// bearer returns the Authorization header of a token signed by keys with
// claims.
func bearer(t *testing.T, keys string, claims pb.Claims) string {
	t.Helper()
	var a, err = auth.NewKeyedAuth(keys)
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := a.Authorize(context.Background(), claims, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var md, _ = metadata.FromOutgoingContext(ctx)
	return md.Get("authorization")[0]
}

// A stack with authorization keys, even without TLS, serves its HTTP
// gateway only to requests with a token its keys signed, whose claims
// cover the request: an unsigned append or read is refused with 401 and
// appends nothing; a signed one is served.
func TestGatewayRequiresAuthorization(t *testing.T) {
	const keys = "c2VjcmV0LWtleS1vZi10aGUtc3RhY2s="
	const otherKeys = "YW5vdGhlci1rZXktb2YtYW5vdGhlci1zdGFjaw=="
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var s, err = devstack.Start(ctx, devstack.Options{Dir: t.TempDir(), UnsafeNoFsync: true, LogLevel: devstacktest.LogLevel(), AuthKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	applyFile(t, s.Journals(), "testdata/journals.yaml")
	appendTo(t, s.Journals(), "tests/one", "first\n") // Once the journal has its primary.
	var url = s.Brokers()[0].Endpoint().URL().String() + "/tests/one"

	var do = func(method, authorization, body string) (int, string) {
		t.Helper()
		var req, err = http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var appendCap = pb.Claims{Capability: pb.Capability_APPEND}
	var readCap = pb.Claims{Capability: pb.Capability_READ}
	for _, tc := range []struct {
		name, method, authorization string
		code                        int
		want                        string
	}{
		{"an unsigned append", http.MethodPut, "", http.StatusUnauthorized, "no Authorization"},
		{"an unsigned read", http.MethodGet, "", http.StatusUnauthorized, "no Authorization"},
		{"an unsigned HEAD", http.MethodHead, "", http.StatusUnauthorized, ""},
		{"an append signed by another key", http.MethodPut, bearer(t, otherKeys, appendCap), http.StatusUnauthorized, "signature is invalid"},
		{"an append with a READ token", http.MethodPut, bearer(t, keys, readCap), http.StatusUnauthorized, "APPEND"},
		{"a read with an APPEND token", http.MethodGet, bearer(t, keys, appendCap), http.StatusUnauthorized, "READ"},
		{"a token that is not a bearer's", http.MethodPut, "Basic Zm9vOmJhcg==", http.StatusUnauthorized, "Bearer"},
		// The broker checks the token's claims, as for a gRPC call: a journal
		// its selector excludes does not exist for it (the gateway answers 500).
		{"an append to a journal the token does not cover", http.MethodPut,
			bearer(t, keys, pb.Claims{Capability: pb.Capability_APPEND, Selector: pb.MustLabelSelector("name=tests/two")}), http.StatusInternalServerError, "JOURNAL_NOT_FOUND"},
	} {
		if code, body := do(tc.method, tc.authorization, "refused\n"); code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want %d naming %q", tc.name, code, body, tc.code, tc.want)
		}
	}

	// Signed requests are served.
	if code, body := do(http.MethodPut, bearer(t, keys, appendCap), "accepted\n"); code != http.StatusNoContent {
		t.Fatalf("a signed append: %d %q", code, body)
	}
	if got := readN(t, s.Journals(), "tests/one", 15); got != "first\naccepted\n" {
		t.Errorf("the journal holds %q, want only the signed append", got)
	}
	var read, cancelRead = context.WithTimeout(ctx, 5*time.Second)
	defer cancelRead()
	var req, _ = http.NewRequestWithContext(read, http.MethodGet, url+"?offset=0", nil)
	req.Header.Set("Authorization", bearer(t, keys, readCap))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf = make([]byte, 15)
	if _, err = io.ReadFull(resp.Body, buf); err != nil || resp.StatusCode != http.StatusPartialContent || string(buf) != "first\naccepted\n" {
		t.Errorf("a signed read: %d %q %v", resp.StatusCode, buf, err)
	}
}
