package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack"
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
	envFile    string
}

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
	cmd.Flags().StringSliceVar(&f.journals, "journals", nil, "journal spec YAML files to apply once the stack is up (gazctl journals apply format)")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "warn", "log level: debug, info, warn or error")
	cmd.Flags().StringVar(&f.envFile, "env-file", "", "also write the gazctl environment to this file, as shell exports")
	return cmd
}

func runDev(ctx context.Context, out io.Writer, f devFlags) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})))

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

	var startCtx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var stack, err = devstack.Start(startCtx, devstack.Options{
		Dir:        f.dir,
		Brokers:    f.brokers,
		EtcdPort:   f.etcdPort,
		BrokerPort: f.brokerPort,
		LogLevel:   level,
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
		if _, err = specs.ApplyJournals(startCtx, stack.Journals(), jf.path, jf.data); err != nil {
			return err
		}
	}

	var env = devEnv(stack)
	fmt.Fprintf(out, "gazconsumer dev: running (data in %s)\n", stack.Dir())
	fmt.Fprintf(out, "  etcd:    %s (prefix %s)\n", stack.EtcdURL(), stack.EtcdPrefix())
	for _, b := range stack.Brokers() {
		fmt.Fprintf(out, "  broker:  %s (%s)\n", b.Endpoint(), b.ID().Suffix)
	}
	fmt.Fprintf(out, "\nTo use gazctl against this stack:\n\n%s\nPress Ctrl-C to stop.\n", env)

	if f.envFile != "" {
		if err = os.WriteFile(f.envFile, []byte(env), 0o644); err != nil {
			return fmt.Errorf("--env-file: %w", err)
		}
	}
	<-ctx.Done()
	return nil
}

// devEnv is the shell environment under which gazctl (and gazconsumer
// consumers) talk to the stack. It leaves out ETCD_PREFIX: consumers read it
// as the prefix of their own shards and members (as Gazette's consumers do),
// which must not be the brokers' prefix.
func devEnv(s *devstack.Stack) string {
	var b strings.Builder
	fmt.Fprintf(&b, "export BROKER_ADDRESS=%s\n", s.Brokers()[0].Endpoint())
	fmt.Fprintf(&b, "export BROKER_CACHE_SIZE=256\n")
	fmt.Fprintf(&b, "export BROKER_FILE_ROOT=%s\n", s.FragmentsRoot())
	fmt.Fprintf(&b, "export ETCD_ADDRESS=%s\n", s.EtcdURL())
	return b.String()
}
