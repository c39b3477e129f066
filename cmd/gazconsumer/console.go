package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"
	"go.gazette.dev/core/server"

	"github.com/gazconsumer/gazconsumer/console"
	"github.com/gazconsumer/gazconsumer/internal/clientflags"
)

// consoleFlags configure gazconsumer console.
type consoleFlags struct {
	clientflags.Flags
	members  clientflags.MemberFlags
	listen   string
	root     string
	interval time.Duration
	// Serving TLS: the console's certificate and key, and the CA its
	// clients' certificates must be signed by (none: any client).
	certFile, keyFile, clientCAFile string
}

func newConsoleCmd() *cobra.Command {
	var f consoleFlags
	var cmd = &cobra.Command{
		Use:   "console",
		Short: "Serve a read-only web console of the consumer groups, journals and state of a deployment",
		Long: `console serves, over HTTP at --listen, a read-only web console of a Gazette
deployment running gazconsumer consumers: every consumer group under
--groups.prefix in etcd (or only the one at --etcd.prefix), its shards by
status, members, throughput and lag, each shard's replicas, sources, recovery
and transactions, the brokers' journals and fragments, and a browser of the
consumers' state through their queries services. It reaches etcd and the
brokers with the members' flags and environment (--etcd.address,
--broker.address, their TLS and authorization), and the members with
gazctl's --consumer.* flags: a client certificate for members serving mutual
TLS, and --consumer.auth-keys to sign its calls.

The console serves HTTPS with --tls.cert-file and --tls.key-file, and only
to clients presenting a certificate signed by --tls.client-ca-file if it is
given: the console shows the state of every consumer, so outside a
development machine, serve it so, or behind a proxy that authenticates.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runConsole(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	f.Flags.Register(cmd.Flags())
	f.members.Register(cmd.Flags())
	cmd.Flags().StringVar(&f.listen, "listen", "127.0.0.1:8090", "address the console serves HTTP on")
	cmd.Flags().StringVar(&f.root, "groups.prefix", "/gazette/consumers/", "etcd prefix under which consumer groups are found (each prefix with shard specs or members is one)")
	cmd.Flags().DurationVar(&f.interval, "interval", time.Second, "interval between the readings of the live charts")
	cmd.Flags().StringVar(&f.certFile, "tls.cert-file", "", "certificate the console serves HTTPS with (with --tls.key-file)")
	cmd.Flags().StringVar(&f.keyFile, "tls.key-file", "", "private key of --tls.cert-file")
	cmd.Flags().StringVar(&f.clientCAFile, "tls.client-ca-file", "", "CA that the certificates of the console's clients must be signed by: only they are served")
	return cmd
}

func runConsole(ctx context.Context, out io.Writer, f consoleFlags) error {
	switch {
	case (f.certFile == "") != (f.keyFile == ""):
		return errors.New("--tls.cert-file and --tls.key-file go together")
	case f.clientCAFile != "" && f.certFile == "":
		return errors.New("--tls.client-ca-file needs --tls.cert-file: clients' certificates are checked over TLS")
	}
	var etcd, err = f.Etcd()
	if err != nil {
		return err
	}
	defer etcd.Close()
	jc, conn, err := f.Brokers()
	if err != nil {
		return err
	}
	defer conn.Close()
	sec, err := f.members.Security()
	if err != nil {
		return err
	}
	c, err := console.New(console.Config{Etcd: etcd, Journals: jc, Members: sec, Root: f.root, Group: f.EtcdPrefix, Interval: f.interval})
	if err != nil {
		return err
	}
	defer c.Close()
	l, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	var scheme = "http"
	if f.certFile != "" {
		var cfg, err = server.BuildTLSConfig(f.certFile, f.keyFile, f.clientCAFile)
		if err != nil {
			l.Close()
			return fmt.Errorf("--tls.cert-file, --tls.key-file, --tls.client-ca-file: %w", err)
		}
		l, scheme = tls.NewListener(l, cfg), "https"
	}
	fmt.Fprintf(out, "gazconsumer console: serving %s://%s/ (Ctrl-C stops it)\n", scheme, l.Addr())
	return c.Serve(ctx, l)
}
