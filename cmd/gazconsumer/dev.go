package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"github.com/gazconsumer/gazconsumer/internal/logformat"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/gazconsumer/gazconsumer/console"
	"github.com/gazconsumer/gazconsumer/devstack"
	"github.com/gazconsumer/gazconsumer/internal/clientflags"
	"github.com/gazconsumer/gazconsumer/specs"
	"github.com/spf13/cobra"
)

type devFlags struct {
	dir        string
	brokers    int
	etcdPort   int
	brokerPort int
	journals   []string
	logLevel   string
	logFormat  string
	envFile    string
	tls        bool
	authKeys   string
	// consolePort is the loopback port of the web console; -1 runs none.
	consolePort int
}

// logOutput is where dev logs: standard error, but in tests.
var logOutput io.Writer = os.Stderr

func newDevCmd() *cobra.Command {
	var f devFlags
	var cmd = &cobra.Command{
		Use:   "dev",
		Short: "Run etcd and Gazette brokers in this process, until interrupted",
		Long: `dev runs a complete Gazette stack in the foreground: an embedded etcd server
and one or more Gazette brokers, on loopback. Journal data and etcd state are
kept under --dir, so a later run on the same directory finds them again.

It prints the addresses of etcd and of the brokers, and the environment under
which Gazette's own gazctl talks to the stack. Ctrl-C stops it cleanly: the
brokers persist their journal fragments before exiting.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDev(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	cmd.Flags().StringVar(&f.dir, "dir", ".gazconsumer/dev", "directory of etcd data and journal fragments")
	cmd.Flags().IntVar(&f.brokers, "brokers", 1, "number of brokers")
	cmd.Flags().IntVar(&f.etcdPort, "etcd-port", 0, "loopback port of etcd's client endpoint (0: any free port)")
	cmd.Flags().IntVar(&f.brokerPort, "broker-port", 8080, "loopback port of the first broker; the others follow it (0: any free port)")
	cmd.Flags().StringSliceVar(&f.journals, "journals", nil, "journal spec YAML files to apply once the stack is up (gazctl journals apply format); journals without a revision are created or updated, so that a restart applies them again")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	cmd.Flags().StringVar(&f.logFormat, "log-format", envOr("LOG_FORMAT", "text"), "log format of the stack's logs (etcd's and Gazette's included): json (a JSON object a line), text or color (text) (env LOG_FORMAT)")
	cmd.Flags().StringVar(&f.envFile, "env-file", "", "also write the gazctl environment to this file, as shell exports")
	cmd.Flags().BoolVar(&f.tls, "tls", false, "serve etcd and the brokers over mutual TLS, with a CA and certificates made under --dir/tls; the environment printed has gazctl and members use them")
	cmd.Flags().IntVar(&f.consolePort, "console-port", 8090, "loopback port of the web console (gazconsumer console) of the stack; if it is taken, any free port; -1 runs none")
	cmd.Flags().StringVar(&f.authKeys, "auth-keys", "", "Gazette authorization keys (base64, comma-separated; \"generate\" makes one): brokers and members refuse requests not signed by them; the environment printed has gazctl and members sign with them")
	return cmd
}

func runDev(ctx context.Context, out io.Writer, f devFlags) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	if f.logFormat == "" {
		f.logFormat = "text"
	}
	if err := logformat.Valid(f.logFormat); err != nil {
		return fmt.Errorf("--log-format (env LOG_FORMAT): %w", err)
	}
	slog.SetDefault(slog.New(logformat.Handler(logOutput, f.logFormat, level)))

	// Read and validate every journal file before starting anything: bad
	// specs fail at once, with the file, the journal and the field.
	type journalFile struct {
		path string
		data []byte
	}
	var files []journalFile
	for _, path := range f.journals {
		var data, err = os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("--journals: %w", err)
		}
		if _, err = specs.ParseJournals(path, data); err != nil {
			return err
		}
		files = append(files, journalFile{path, data})
	}

	if f.authKeys == "generate" {
		var key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return fmt.Errorf("--auth-keys: %w", err)
		}
		f.authKeys = base64.StdEncoding.EncodeToString(key)
	}

	var startCtx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var stack, err = devstack.Start(startCtx, devstack.Options{
		Dir:        f.dir,
		Brokers:    f.brokers,
		EtcdPort:   f.etcdPort,
		BrokerPort: f.brokerPort,
		LogLevel:   level,
		TLS:        f.tls,
		AuthKeys:   f.authKeys,
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "gazconsumer dev: stopping (persisting journal fragments)")
		if err := stack.Close(); err != nil {
			slog.Error("closing the stack", "err", err)
		}
	}()

	for _, jf := range files {
		if _, err = specs.UpsertJournals(startCtx, stack.Journals(), jf.path, jf.data); err != nil {
			return err
		}
	}

	var consoleURL string
	if f.consolePort >= 0 {
		var stop func()
		if consoleURL, stop, err = startDevConsole(ctx, stack, f.consolePort); err != nil {
			return err
		}
		defer stop() // Before the stack closes.
	}

	var env = devEnv(stack)
	var brokers []string
	for _, b := range stack.Brokers() {
		brokers = append(brokers, string(b.Endpoint()))
	}
	slog.Info("gazconsumer dev: the stack is running", "dir", stack.Dir(), "etcd", stack.EtcdURL(), "brokers", brokers,
		"tls", f.tls, "authorization", f.authKeys != "")
	fmt.Fprintf(out, "gazconsumer dev: running (data in %s)\n", stack.Dir())
	fmt.Fprintf(out, "  etcd:    %s (prefix %s)\n", stack.EtcdURL(), stack.EtcdPrefix())
	for _, b := range stack.Brokers() {
		fmt.Fprintf(out, "  broker:  %s (%s)\n", b.Endpoint(), b.ID().Suffix)
	}
	if consoleURL != "" {
		fmt.Fprintf(out, "  console: %s\n", consoleURL)
	}
	fmt.Fprintf(out, "\nTo use gazctl against this stack:\n\n%s\nPress Ctrl-C to stop.\n", env)

	if f.envFile != "" {
		// It may hold authorization keys: readable by its owner only.
		if err = os.WriteFile(f.envFile, []byte(env), 0o600); err != nil {
			return fmt.Errorf("--env-file: %w", err)
		}
	}
	<-ctx.Done()
	return nil
}

// startDevConsole serves the web console of stack on loopback port (or,
// if it is taken, any free port), and returns its URL and the function
// stopping it. It calls members as the environment of devEnv has them
// called: with the stack's certificate and authorization keys.
func startDevConsole(ctx context.Context, stack *devstack.Stack, port int) (string, func(), error) {
	var flags clientflags.MemberFlags
	if files, ok := stack.TLS(); ok {
		flags.CertFile, flags.CertKeyFile, flags.TrustedCAFile = files.CertFile, files.KeyFile, files.CAFile
	}
	flags.AuthKeys = stack.AuthKeys()
	var sec, err = flags.Security()
	if err != nil {
		return "", nil, fmt.Errorf("the console: %w", err)
	}
	c, err := console.New(console.Config{Etcd: stack.Etcd(), Journals: stack.Journals(), Members: sec})
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		slog.Warn("the console's port is taken: serving it on another", "port", port, "err", err)
		if l, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			c.Close()
			return "", nil, fmt.Errorf("the console: %w", err)
		}
	}
	var serveCtx, cancel = context.WithCancel(ctx)
	var done = make(chan struct{})
	go func() {
		defer close(done)
		defer c.Close()
		if err := c.Serve(serveCtx, l); err != nil {
			slog.Error("the console stopped", "err", err)
		}
	}()
	return fmt.Sprintf("http://%s/", l.Addr()), func() { cancel(); <-done }, nil
}

// devEnv is the shell environment under which gazctl (and gazconsumer
// consumers) talk to the stack. It leaves out ETCD_PREFIX: consumers read it
// as the prefix of their own shards and members (as Gazette's consumers do),
// which must not be the brokers' prefix.
//
// Gazette's variables serve both sides: a member reads CONSUMER_SERVER_*
// and CONSUMER_PEER_* to serve mutual TLS and CONSUMER_AUTH_KEYS to verify
// calls, while gazctl reads CONSUMER_CERT_FILE, CONSUMER_TRUSTED_CA_FILE and
// CONSUMER_AUTH_KEYS to call members.
func devEnv(s *devstack.Stack) string {
	var b strings.Builder
	var export = func(name, value string) { fmt.Fprintf(&b, "export %s=%s\n", name, shellQuote(value)) }
	export("BROKER_ADDRESS", string(s.Brokers()[0].Endpoint()))
	export("BROKER_CACHE_SIZE", "256")
	export("BROKER_FILE_ROOT", s.FragmentsRoot())
	export("ETCD_ADDRESS", s.EtcdURL())
	if files, ok := s.TLS(); ok {
		for _, prefix := range []string{"BROKER", "ETCD", "CONSUMER"} {
			export(prefix+"_CERT_FILE", files.CertFile)
			export(prefix+"_CERT_KEY_FILE", files.KeyFile)
			export(prefix+"_TRUSTED_CA_FILE", files.CAFile)
		}
		for _, prefix := range []string{"CONSUMER_SERVER", "CONSUMER_PEER"} {
			export(prefix+"_CERT_FILE", files.CertFile)
			export(prefix+"_CERT_KEY_FILE", files.KeyFile)
			export(prefix+"_CA_FILE", files.CAFile)
		}
	}
	if keys := s.AuthKeys(); keys != "" {
		export("BROKER_AUTH_KEYS", keys)
		export("CONSUMER_AUTH_KEYS", keys)
	}
	return b.String()
}

// shellQuote quotes v for a POSIX shell, if it needs quoting.
func shellQuote(v string) string {
	if v != "" && strings.IndexFunc(v, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=+,@%", r))
	}) < 0 {
		return v
	}
	return "'" + strings.ReplaceAll(v, "'", `'\''`) + "'"
}
