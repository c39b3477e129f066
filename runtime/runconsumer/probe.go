package runconsumer

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/gazconsumer/gazconsumer/internal/clientflags"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// ProbeCommand is the first argument that makes Main a probe of a member
// rather than a member: `<command> probe ready|live [flags]` (see Probe).
const ProbeCommand = "probe"

// ProbeTimeout bounds a probe's request.
const ProbeTimeout = 5 * time.Second

// Probe checks the member of this host that f configures, as a
// Kubernetes exec probe does: it GETs /debug/ready on 127.0.0.1 at
// --consumer.port, over TLS with the member's peer certificate
// (--consumer.peer-cert-file, ...) if the member serves TLS, checking the
// member's certificate against --consumer.host, the name it advertises.
// With kind "ready" it returns nil only if the member answers 200 (ready);
// with kind "live", if it answers at all, 200 or 503, within ProbeTimeout:
// a member that is not ready (joining, or with a FAILED shard) is alive,
// one whose port or diagnostics don't answer is wedged. It returns what
// the member answered.
func Probe(ctx context.Context, f Flags, kind string) (string, error) {
	if kind != "ready" && kind != "live" {
		return "", fmt.Errorf("probe %q: want ready or live", kind)
	}
	if f.Port == "" {
		return "", errors.New("probe: --consumer.port (env CONSUMER_PORT) is not set: it is the port probed")
	}
	var scheme = "http"
	var transport = &http.Transport{DisableKeepAlives: true}
	if f.ServerCertFile != "" {
		var cfg, err = clientflags.BuildTLS("consumer.peer-cert-file", "consumer.peer-cert-key-file", f.PeerCertFile, f.PeerCertKeyFile, f.PeerCAFile)
		if err != nil {
			return "", fmt.Errorf("probe: %w", err)
		}
		cfg.ServerName = f.Host
		if cfg.ServerName == "" {
			cfg.ServerName = "localhost"
		}
		scheme, transport.TLSClientConfig = "https", cfg
	}
	var ctxT, cancel = context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	var url = scheme + "://" + net.JoinHostPort("127.0.0.1", f.Port) + "/debug/ready"
	var req, err = http.NewRequestWithContext(ctxT, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("probe: %w", err)
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return "", fmt.Errorf("probe: GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return "", fmt.Errorf("probe: reading the answer of %s: %w", url, err)
	}
	var answer = fmt.Sprintf("%d %s", resp.StatusCode, strings.TrimSpace(string(body)))
	switch {
	case resp.StatusCode == http.StatusOK:
		return answer, nil
	case kind == "live" && resp.StatusCode == http.StatusServiceUnavailable:
		return answer, nil
	}
	return answer, fmt.Errorf("probe %s: GET %s: %s", kind, url, answer)
}

// probeMain is Main for `<command> probe ready|live [flags]`: it returns
// the exit code, 0 if the probe succeeded.
func probeMain(name string, args []string, out io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(out, "usage: %s %s ready|live [flags]\n", name, ProbeCommand)
		return ExitFailure
	}
	var f Flags
	var fs = flag.NewFlagSet(name+" "+ProbeCommand+" "+args[0], flag.ContinueOnError)
	fs.SetOutput(out)
	f.Register(fs, name)
	if err := fs.Parse(args[1:]); err != nil {
		return ExitFailure
	}
	if err := f.Check(fs); err != nil {
		fmt.Fprintf(out, "%s is misconfigured: %v\n", name, err)
		return ExitFailure
	}
	var answer, err = Probe(context.Background(), f, args[0])
	if err != nil {
		fmt.Fprintln(out, err)
		return ExitFailure
	}
	fmt.Fprintln(out, answer)
	return 0
}
