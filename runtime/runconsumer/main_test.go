package runconsumer_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/runtime/runconsumer"
)

// mainEnv, set, makes the test binary run runconsumer.Main (see TestMain).
const mainEnv = "RUNCONSUMER_TEST_MAIN"

// mainCmd returns the test binary as a consumer command run by
// runconsumer.Main with args, in an environment of only env (and PATH).
func mainCmd(t *testing.T, env []string, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	var cmd = exec.Command(os.Args[0], args...)
	cmd.Env = append([]string{mainEnv + "=1", "PATH=" + os.Getenv("PATH"), "CONSUMER_STATE_DIR=" + t.TempDir()}, env...)
	var out = new(bytes.Buffer)
	cmd.Stdout, cmd.Stderr = out, out
	return cmd, out
}

// exitCode runs cmd and returns its exit code.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	var err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0
}

// A misconfigured flag or environment variable fails the command at once,
// with exit code 1, naming the flag or variable and its value; none is
// replaced by a default in silence.
func TestMisconfigurationFailsAtStart(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string // In what the command prints.
	}{
		{"malformed CONSUMER_LIMIT", []string{"CONSUMER_LIMIT=x"}, nil, []string{`CONSUMER_LIMIT=\"x\"`, "--consumer.limit", "not an integer"}},
		{"negative CONSUMER_LIMIT", []string{"CONSUMER_LIMIT=-3"}, nil, []string{`CONSUMER_LIMIT=\"-3\"`, "at least 1"}},
		{"zero --consumer.limit", nil, []string{"--consumer.limit=0"}, []string{"--consumer.limit", "is 0"}},
		{"CONSUMER_HANDOFF without a unit", []string{"CONSUMER_HANDOFF=60"}, nil, []string{`CONSUMER_HANDOFF=\"60\"`, "--consumer.handoff", "not a duration"}},
		{"malformed ETCD_LEASE_TTL", []string{"ETCD_LEASE_TTL=soon"}, nil, []string{`ETCD_LEASE_TTL=\"soon\"`, "--etcd.lease"}},
		{"a lease under a second", nil, []string{"--etcd.lease=500ms"}, []string{"--etcd.lease", "500ms", "at least 1s"}},
		{"malformed LOG_LEVEL", []string{"LOG_LEVEL=loud"}, nil, []string{`LOG_LEVEL=\"loud\"`, "--log.level"}},
		{"malformed BROKER_CACHE_SIZE", []string{"BROKER_CACHE_SIZE=big"}, nil, []string{`BROKER_CACHE_SIZE=\"big\"`, "--broker.cache.size"}},
		{"a port that is not one", nil, []string{"--consumer.port=http"}, []string{"--consumer.port", `\"http\"`, "not a port number"}},
		{"a peer certificate without server TLS", nil, []string{"--consumer.peer-cert-file=/etc/peer.crt"},
			[]string{"--consumer.peer-cert-file", "/etc/peer.crt", "--consumer.server-cert-file is not set"}},
		{"a peer CA without server TLS", []string{"CONSUMER_PEER_CA_FILE=/etc/ca.crt"}, nil,
			[]string{"--consumer.peer-ca-file", "/etc/ca.crt"}},
		{"a malformed flag", nil, []string{"--consumer.limit=many"}, []string{"consumer.limit", "many"}},
		{"an unknown flag", nil, []string{"--consumer.limt=3"}, []string{"consumer.limt"}},
		{"malformed LOG_FORMAT", []string{"LOG_FORMAT=xml"}, nil, []string{`LOG_FORMAT=\"xml\"`, "--log.format", "not a log format"}},
		{"malformed --log.format", nil, []string{"--log.format=logfmt"}, []string{"--log.format", `\"logfmt\"`, "json, text or color"}},
		{"malformed ROCKSDB_MEMORY_BUDGET", []string{"ROCKSDB_MEMORY_BUDGET=1GB"}, nil, []string{`ROCKSDB_MEMORY_BUDGET=\"1GB\"`, "--rocksdb.memory-budget", "not a size"}},
		{"malformed --rocksdb.memory-budget", nil, []string{"--rocksdb.memory-budget=lots"}, []string{"rocksdb.memory-budget", `"lots"`, "not a size"}},
		{"malformed GC_HEAP_FLOOR", []string{"GC_HEAP_FLOOR=64MB"}, nil, []string{`GC_HEAP_FLOOR=\"64MB\"`, "--gc.heap-floor", "not a size"}},
		{"malformed --gc.heap-floor", nil, []string{"--gc.heap-floor=-1"}, []string{"gc.heap-floor", `"-1"`, "not a size"}},
		{"a memory budget too small", nil, []string{"--rocksdb.memory-budget=1Mi"}, []string{"--rocksdb.memory-budget", "is 1Mi", "at least 32Mi"}},
		{"malformed ROCKSDB_WRITE_BUFFER_SHARE", []string{"ROCKSDB_WRITE_BUFFER_SHARE=half"}, nil, []string{`ROCKSDB_WRITE_BUFFER_SHARE=\"half\"`, "--rocksdb.write-buffer-share", "not a number"}},
		{"shares leaving no block cache", []string{"ROCKSDB_ROW_CACHE_SHARE=0.7"}, []string{"--rocksdb.write-buffer-share=0.3"},
			[]string{"--rocksdb.write-buffer-share", "--rocksdb.row-cache-share", "below 0.9"}},
		{"no ROCKSDB_SHARDS", []string{"ROCKSDB_SHARDS=0"}, nil, []string{`ROCKSDB_SHARDS=\"0\"`, "--rocksdb.shards", "at least 1"}},
		{"malformed CONSUMER_FORK_YIELD", []string{"CONSUMER_FORK_YIELD=soon"}, nil,
			[]string{`CONSUMER_FORK_YIELD=\"soon\"`, "--consumer.fork-yield", "not a duration"}},
		{"negative fork yield", nil, []string{"--consumer.fork-yield=-1s"}, []string{"--consumer.fork-yield", "-1s", "must not be negative"}},
		{"malformed CONSUMER_HINTS_INTERVAL", []string{"CONSUMER_HINTS_INTERVAL=often"}, nil,
			[]string{`CONSUMER_HINTS_INTERVAL=\"often\"`, "--consumer.hints-interval", "not a duration"}},
		{"no hints interval", nil, []string{"--consumer.hints-interval=0s"}, []string{"--consumer.hints-interval", "0s", "must be positive"}},
		{"malformed CONSUMER_HINTS_GROWTH", []string{"CONSUMER_HINTS_GROWTH=a fifth"}, nil,
			[]string{`CONSUMER_HINTS_GROWTH=\"a fifth\"`, "--consumer.hints-growth", "not a number"}},
		{"negative hints growth", nil, []string{"--consumer.hints-growth=-0.5"}, []string{"--consumer.hints-growth", "-0.5", "0 or more"}},
		{"malformed CONSUMER_READY_IGNORES_FAILED", []string{"CONSUMER_READY_IGNORES_FAILED=maybe"}, nil,
			[]string{`CONSUMER_READY_IGNORES_FAILED=\"maybe\"`, "--consumer.ready-ignores-failed", "not a boolean"}},
		{"malformed BROKER_DIRECT_FRAGMENT_READS", []string{"BROKER_DIRECT_FRAGMENT_READS=often"}, nil,
			[]string{`BROKER_DIRECT_FRAGMENT_READS=\"often\"`, "--broker.direct-fragment-reads", "not a boolean"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cmd, out = mainCmd(t, tc.env, tc.args...)
			var start = time.Now()
			if code := exitCode(t, cmd); code != runconsumer.ExitFailure {
				t.Fatalf("exit code %d, want %d; it printed:\n%s", code, runconsumer.ExitFailure, out)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("failed after %s, not at once", d)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("it printed %q, which does not name %q", out, w)
				}
			}
		})
	}
}

// A malformed environment variable whose flag is set on the command line
// is not used, and is no error: the command goes on, here to etcd.
func TestFlagOverridesMalformedEnvironment(t *testing.T) {
	var cmd, out = mainCmd(t, []string{"CONSUMER_LIMIT=x"}, "--consumer.limit=4", "--etcd.address=http://127.0.0.1:1")
	if code := exitCode(t, cmd); code != runconsumer.ExitEtcdUnreachable {
		t.Fatalf("exit code %d, want %d; it printed:\n%s", code, runconsumer.ExitEtcdUnreachable, out)
	}
}

// A member that cannot reach etcd at start fails within
// EtcdStartTimeout, with ExitEtcdUnreachable, naming the address; and
// SIGTERM ends it at once while it waits.
func TestUnreachableEtcd(t *testing.T) {
	const address = "http://127.0.0.1:1"
	t.Run("fails", func(t *testing.T) {
		var cmd, out = mainCmd(t, nil, "--etcd.address="+address, "--consumer.host=127.0.0.1")
		var start = time.Now()
		if code := exitCode(t, cmd); code != runconsumer.ExitEtcdUnreachable {
			t.Fatalf("exit code %d, want %d; it printed:\n%s", code, runconsumer.ExitEtcdUnreachable, out)
		}
		if d := time.Since(start); d > runconsumer.EtcdStartTimeout+5*time.Second {
			t.Errorf("failed after %s, past the bound of %s", d, runconsumer.EtcdStartTimeout)
		}
		if !strings.Contains(out.String(), address) || !strings.Contains(out.String(), "etcd is unreachable") {
			t.Errorf("it printed %q, which does not name etcd's address %s", out, address)
		}
	})
	t.Run("SIGTERM", func(t *testing.T) {
		var cmd, out = mainCmd(t, nil, "--etcd.address="+address, "--consumer.host=127.0.0.1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		var start = time.Now()
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		var err = cmd.Wait()
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("stopped %s after SIGTERM", d)
		}
		if err != nil {
			t.Errorf("stopped while starting: %v, want exit code 0; it printed:\n%s", err, out)
		}
	})
}

// With --log.format=json (or LOG_FORMAT=json) a member logs a JSON object a
// line, its errors included; text and color log slog's key=value text.
func TestLogFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"flag", nil, []string{"--log.format=json"}},
		{"environment", []string{"LOG_FORMAT=json"}, nil},
		{"flag over environment", []string{"LOG_FORMAT=text"}, []string{"--log.format=json"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// It logs as it starts, then fails to reach etcd.
			var cmd, out = mainCmd(t, tc.env, append(tc.args, "--etcd.address=http://127.0.0.1:1", "--consumer.host=127.0.0.1")...)
			if code := exitCode(t, cmd); code != runconsumer.ExitEtcdUnreachable {
				t.Fatalf("exit code %d, want %d; it printed:\n%s", code, runconsumer.ExitEtcdUnreachable, out)
			}
			checkJSONLines(t, out.String(), "etcd is unreachable")
		})
	}
	t.Run("misconfigured", func(t *testing.T) {
		var cmd, out = mainCmd(t, []string{"LOG_FORMAT=json"}, "--consumer.limit=0")
		if code := exitCode(t, cmd); code != runconsumer.ExitFailure {
			t.Fatalf("exit code %d, want %d; it printed:\n%s", code, runconsumer.ExitFailure, out)
		}
		checkJSONLines(t, out.String(), "--consumer.limit")
	})
	for _, format := range []string{"text", "color"} {
		t.Run(format, func(t *testing.T) {
			var cmd, out = mainCmd(t, nil, "--log.format="+format, "--consumer.limit=0")
			if code := exitCode(t, cmd); code != runconsumer.ExitFailure {
				t.Fatalf("exit code %d, want %d; it printed:\n%s", code, runconsumer.ExitFailure, out)
			}
			if !strings.HasPrefix(out.String(), "time=") || !strings.Contains(out.String(), "level=ERROR") {
				t.Errorf("it printed %q, not slog's text", out)
			}
		})
	}
}

// checkJSONLines checks that each line of out is a JSON object with a time,
// a level and a message, and that one of them holds want.
func checkJSONLines(t *testing.T, out, want string) {
	t.Helper()
	var found bool
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("line %q is not JSON: %v", line, err)
			continue
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := v[k]; !ok {
				t.Errorf("line %q has no %q", line, k)
			}
		}
		found = found || strings.Contains(line, want)
	}
	if !found {
		t.Errorf("no line of %q holds %q", out, want)
	}
}
