package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/spf13/cobra"

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
TLS, and --consumer.auth-keys to sign its calls.`,
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
	return cmd
}

func runConsole(ctx context.Context, out io.Writer, f consoleFlags) error {
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
	fmt.Fprintf(out, "gazconsumer console: serving http://%s/ (Ctrl-C stops it)\n", l.Addr())
	return c.Serve(ctx, l)
}
