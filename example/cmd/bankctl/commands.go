package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/gazconsumer/gazconsumer/example/internal/check"
	"github.com/gazconsumer/gazconsumer/example/internal/inspect"
	"github.com/gazconsumer/gazconsumer/example/internal/load"
	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/internal/progress"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/auth"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/message"
	"go.gazette.dev/core/server"
	"go.uber.org/zap"
)

// endpoints are the addresses bankctl talks to, and how it authenticates
// to each: the TLS files and authorization keys of Gazette's clients.
type endpoints struct {
	broker, etcd, ledger, leaderboard string
	brokerTLS, etcdTLS, consumerTLS   tlsFiles
	brokerAuthKeys, consumerAuthKeys  string
	closers                           []io.Closer
}

// tlsFiles are a client's certificate, its key and the CA it trusts.
type tlsFiles struct{ cert, key, ca string }

func (f *tlsFiles) register(cmd *cobra.Command, name, env string) {
	cmd.PersistentFlags().StringVar(&f.cert, name+".cert-file", os.Getenv(env+"_CERT_FILE"), "client TLS certificate for "+name+" (env "+env+"_CERT_FILE)")
	cmd.PersistentFlags().StringVar(&f.key, name+".cert-key-file", os.Getenv(env+"_CERT_KEY_FILE"), "client TLS private key for "+name+" (env "+env+"_CERT_KEY_FILE)")
	cmd.PersistentFlags().StringVar(&f.ca, name+".trusted-ca-file", os.Getenv(env+"_TRUSTED_CA_FILE"), "CA that "+name+" server certificates must be signed by (env "+env+"_TRUSTED_CA_FILE)")
}

// config builds the TLS configuration of f, or nil if f names no file.
func (f tlsFiles) config(name string) (*tls.Config, error) {
	if f == (tlsFiles{}) {
		return nil, nil
	}
	var c, err = server.BuildTLSConfig(f.cert, f.key, f.ca)
	if err != nil {
		return nil, fmt.Errorf("--%s.cert-file: %w", name, err)
	}
	return c, nil
}

// security of calls to name, with f and authorization keys.
func security(name string, f tlsFiles, keys string) (brokerconn.Security, error) {
	var sec brokerconn.Security
	var err error
	if sec.TLS, err = f.config(name); err != nil {
		return sec, err
	}
	if keys != "" {
		var a, err = auth.NewKeyedAuth(keys)
		if err != nil {
			return sec, fmt.Errorf("--%s.auth-keys: %w", name, err)
		}
		sec.Auth = a
	}
	return sec, nil
}

func (e *endpoints) register(cmd *cobra.Command) {
	e.brokerTLS.register(cmd, "broker", "BROKER")
	e.etcdTLS.register(cmd, "etcd", "ETCD")
	e.consumerTLS.register(cmd, "consumer", "CONSUMER")
	cmd.PersistentFlags().StringVar(&e.brokerAuthKeys, "broker.auth-keys", os.Getenv("BROKER_AUTH_KEYS"), "keys signing requests to brokers (env BROKER_AUTH_KEYS)")
	cmd.PersistentFlags().StringVar(&e.consumerAuthKeys, "consumer.auth-keys", os.Getenv("CONSUMER_AUTH_KEYS"), "keys signing calls to members (env CONSUMER_AUTH_KEYS)")
	cmd.PersistentFlags().StringVar(&e.broker, "broker.address", envOr("BROKER_ADDRESS", "http://127.0.0.1:8080"), "Gazette broker endpoint (env BROKER_ADDRESS)")
	cmd.PersistentFlags().StringVar(&e.etcd, "etcd.address", os.Getenv("ETCD_ADDRESS"), "etcd endpoint: to read recovery-log hints from (inspect, check; empty plays the logs from their start), and to route queries by (--routed) (env ETCD_ADDRESS)")
	cmd.PersistentFlags().StringVar(&e.ledger, "ledger.address", os.Getenv("LEDGER_ADDRESS"), "address of a ledger member's Shard API (env LEDGER_ADDRESS)")
	cmd.PersistentFlags().StringVar(&e.leaderboard, "leaderboard.address", os.Getenv("LEADERBOARD_ADDRESS"), "address of a leaderboard member's Shard API (env LEADERBOARD_ADDRESS)")
}

func (e *endpoints) close() {
	for _, c := range e.closers {
		_ = c.Close()
	}
	e.closers = nil
}

func (e *endpoints) journals() (pb.RoutedJournalClient, error) {
	var sec, err = security("broker", e.brokerTLS, e.brokerAuthKeys)
	if err != nil {
		return nil, err
	}
	jc, conn, err := brokerconn.DialSecure(pb.Endpoint(e.broker), pb.NoopDispatchRouter{}, sec)
	if err != nil {
		return nil, fmt.Errorf("--broker.address: %w", err)
	}
	e.closers = append(e.closers, conn)
	return jc, nil
}

func (e *endpoints) shards(flag, addr string) (pc.ShardClient, error) {
	if addr == "" {
		return nil, fmt.Errorf("--%s is required", flag)
	}
	var sec, err = security("consumer", e.consumerTLS, e.consumerAuthKeys)
	if err != nil {
		return nil, err
	}
	sc, conn, err := inspect.DialShards(pb.Endpoint(addr), sec)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	e.closers = append(e.closers, conn)
	return sc, nil
}

func (e *endpoints) etcdClient() (*clientv3.Client, error) {
	if e.etcd == "" {
		return nil, nil
	}
	var tlsConfig, err = e.etcdTLS.config("etcd")
	if err != nil {
		return nil, err
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(e.etcd, ","), TLS: tlsConfig, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("--etcd.address: %w", err)
	}
	e.closers = append(e.closers, c)
	return c, nil
}

// snapshot opens the state of the application served at addr.
func (e *endpoints) snapshot(ctx context.Context, flag, addr string) (*inspect.Snapshot, error) {
	var sc, err = e.shards(flag, addr)
	if err != nil {
		return nil, err
	}
	jc, err := e.journals()
	if err != nil {
		return nil, err
	}
	etcd, err := e.etcdClient()
	if err != nil {
		return nil, err
	}
	return inspect.Open(ctx, sc, jc, etcd, "")
}

func envOr(name, fallback string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return fallback
}

func newRootCmd() *cobra.Command {
	var ep = new(endpoints)
	var root = &cobra.Command{
		Use:           "bankctl",
		Short:         "Publish to, follow, query and check the example bank",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPostRun: func(*cobra.Command, []string) {
			ep.close()
		},
	}
	ep.register(root)
	root.AddCommand(newPublishCmd(ep), newFollowCmd(ep), newBalancesCmd(ep), newTopCmd(ep), newInspectCmd(ep), newCheckCmd(ep))
	return root
}

func newPublishCmd(ep *endpoints) *cobra.Command {
	var opts load.Options
	var record string
	var follow bool
	var timeout time.Duration
	var rate float64
	var cmd = &cobra.Command{
		Use:   "publish",
		Short: "Publish orders and payments exactly once, and record the outcome they must have",
		Long: `publish generates orders and payments from --seed, publishes them in transactions
of --txn messages (each becomes visible to the consumers at once, when its
acknowledgements are written), and writes to --record what it published and
the balances and activity that must result, computed on its own. About half
the orders are paid at once by a payment naming them; the others are never
paid, and the ledger releases their holds once its hold window passes. Of the
payments, --poison more are invalid (a negative amount): the ledger records
them as dead letters.

With --follow, it also shows the progress of the ledger and the leaderboard
until both have caught up with all it published.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ctx = cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return runPublish(ctx, cmd.OutOrStdout(), ep, opts, record, follow, rate)
		},
	}
	cmd.Flags().IntVar(&opts.Orders, "orders", 10000, "number of orders")
	cmd.Flags().IntVar(&opts.Payments, "payments", 10000, "number of payments")
	cmd.Flags().IntVar(&opts.Poison, "poison", 5, "number of invalid payments, beside --payments")
	cmd.Flags().IntVar(&opts.Customers, "customers", 500, "number of customers")
	cmd.Flags().IntVar(&opts.Accounts, "accounts", 3, "number of accounts of each customer")
	cmd.Flags().Uint64Var(&opts.Seed, "seed", 1, "seed of the generated input")
	cmd.Flags().IntVar(&opts.TxnSize, "txn", 500, "messages per publisher transaction")
	cmd.Flags().StringVar(&record, "record", "bank-record.json", "file to write the record of the load to")
	cmd.Flags().BoolVar(&follow, "follow", false, "show the consumers' progress until they have caught up")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: never)")
	cmd.Flags().Float64Var(&rate, "rate", 0, "publish at most this many messages a second (0: as fast as the brokers take them)")
	return cmd
}

func runPublish(ctx context.Context, out io.Writer, ep *endpoints, opts load.Options, record string, follow bool, rate float64) error {
	if rate < 0 {
		return fmt.Errorf("--rate %v: not a number of messages a second", rate)
	}
	var msgs, rec, err = load.Generate(opts)
	if err != nil {
		return err
	}
	jc, err := ep.journals()
	if err != nil {
		return err
	}
	var follower *progress.Follower
	if follow {
		var ledger, err = ep.shards("ledger.address", ep.ledger)
		if err != nil {
			return err
		}
		leaderboard, err := ep.shards("leaderboard.address", ep.leaderboard)
		if err != nil {
			return err
		}
		sec, err := security("consumer", ep.consumerTLS, ep.consumerAuthKeys)
		if err != nil {
			return err
		}
		follower = progress.NewFollower(jc, sec, progress.App{Name: "ledger", Shards: ledger}, progress.App{Name: "leaderboard", Shards: leaderboard})
		defer follower.Close()
	}

	var published atomic.Int64
	var done = make(chan struct{})
	var pubErr = make(chan error, 1)
	var start = time.Now()
	go func() {
		defer close(done)
		pubErr <- load.PublishAt(ctx, jc, msgs, opts.TxnSize, rate, func(n int) { published.Store(int64(n)) })
	}()

	var screen = newScreen(out)
	var lines = func(sts []progress.Status) []string {
		var lines = []string{fmt.Sprintf("%-12s %8d/%d messages in transactions of %d  %s",
			"published", published.Load(), len(msgs), opts.TxnSize, time.Since(start).Round(100*time.Millisecond))}
		for _, st := range sts {
			lines = append(lines, fmt.Sprintf("%-12s %8d/%d consumed  lag %9s  %5d transactions  %d/%d shards primary",
				st.Name, st.Messages, len(msgs), bytesString(st.Lag), st.Transactions, st.Primaries, st.Shards))
		}
		return lines
	}

	var last []progress.Status
	if follower == nil {
		var ticker = time.NewTicker(250 * time.Millisecond)
		defer ticker.Stop()
	wait:
		for {
			select {
			case <-done:
				break wait
			case <-ticker.C:
				screen.show(lines(nil))
			}
		}
	} else if last, err = follower.Wait(ctx, 250*time.Millisecond, done, func(sts []progress.Status) { screen.show(lines(sts)) }); err != nil {
		<-done
		return errors.Join(err, <-pubErr)
	}
	if err = <-pubErr; err != nil {
		return err
	}
	screen.final(lines(last))
	fmt.Fprintf(out, "published %d orders (%d paid at once, %d never) and %d payments (and %d invalid) of %d customers in %d transactions, in %s\n",
		opts.Orders, rec.Paid, len(rec.Unpaid), opts.Payments, opts.Poison, opts.Customers, rec.Transactions, time.Since(start).Round(time.Millisecond))
	return rec.WriteFile(record)
}

func newFollowCmd(ep *endpoints) *cobra.Command {
	var timeout time.Duration
	var cmd = &cobra.Command{
		Use:   "follow",
		Short: "Show the progress of the ledger and the leaderboard until they have caught up",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ctx = cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			var jc, err = ep.journals()
			if err != nil {
				return err
			}
			ledger, err := ep.shards("ledger.address", ep.ledger)
			if err != nil {
				return err
			}
			leaderboard, err := ep.shards("leaderboard.address", ep.leaderboard)
			if err != nil {
				return err
			}
			sec, err := security("consumer", ep.consumerTLS, ep.consumerAuthKeys)
			if err != nil {
				return err
			}
			var f = progress.NewFollower(jc, sec, progress.App{Name: "ledger", Shards: ledger}, progress.App{Name: "leaderboard", Shards: leaderboard})
			defer f.Close()
			var done = make(chan struct{})
			close(done)
			var screen = newScreen(cmd.OutOrStdout())
			var lines = func(sts []progress.Status) []string {
				var lines []string
				for _, st := range sts {
					lines = append(lines, fmt.Sprintf("%-12s %8d consumed  lag %9s  %5d transactions  %d/%d shards primary",
						st.Name, st.Messages, bytesString(st.Lag), st.Transactions, st.Primaries, st.Shards))
				}
				return lines
			}
			last, err := f.Wait(ctx, 250*time.Millisecond, done, func(sts []progress.Status) { screen.show(lines(sts)) })
			if err != nil {
				return err
			}
			screen.final(lines(last))
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long (0: never)")
	return cmd
}

// newInspectCmd is the offline inspection of the consumers' state, by
// playing their shards' recovery logs.
func newInspectCmd(ep *endpoints) *cobra.Command {
	var cmd = &cobra.Command{
		Use:   "inspect",
		Short: "Inspect the consumers' tables offline, by playing their shards' recovery logs",
		Long: `inspect plays each shard's recovery log into a temporary directory, read-only and
without disturbing the shards, and prints their tables as of each shard's last
commit: an offline inspection tool, seconds to minutes per call. The live
queries are bankctl balances and bankctl top.`,
	}
	cmd.AddCommand(newInspectBalancesCmd(ep), newInspectTopCmd(ep))
	return cmd
}

func newInspectBalancesCmd(ep *endpoints) *cobra.Command {
	var customer string
	var cmd = &cobra.Command{
		Use:   "balances",
		Short: "Print the ledger's balances and customers' activity, as of each shard's last commit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var snap, err = ep.snapshot(cmd.Context(), "ledger.address", ep.ledger)
			if err != nil {
				return err
			}
			defer snap.Close()
			balances, err := snap.Balances()
			if err != nil {
				return err
			}
			activities, err := snap.Activities()
			if err != nil {
				return err
			}
			var w = tabwriter.NewWriter(cmd.OutOrStdout(), 2, 8, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "CUSTOMER\tACCOUNT\tBALANCE\tCHANGES\t")
			for _, b := range balances {
				if customer == "" || b.CustomerId == customer {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t\n", b.CustomerId, b.AccountId, cents(b.BalanceCents), b.Version)
				}
			}
			fmt.Fprintln(w, "\t\t\t\t")
			fmt.Fprintln(w, "CUSTOMER\tORDERS\tORDERED\tPAYMENTS\tPAID\tLAST ACTIVITY\t")
			for _, a := range activities {
				if customer == "" || a.CustomerId == customer {
					fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%s\t%s\t\n", a.CustomerId, a.Orders, cents(a.OrderedCents),
						a.Payments, cents(a.PaidCents), a.LastAt.AsTime().Format(time.DateTime))
				}
			}
			if err = w.Flush(); err != nil {
				return err
			}
			printCheckpoints(cmd.OutOrStdout(), snap)
			return nil
		},
	}
	cmd.Flags().StringVar(&customer, "customer", "", "print only this customer's")
	return cmd
}

func newInspectTopCmd(ep *endpoints) *cobra.Command {
	var n int
	var cmd = &cobra.Command{
		Use:   "top",
		Short: "Print the leaderboard's largest balances, as of each shard's last commit",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var snap, err = ep.snapshot(cmd.Context(), "leaderboard.address", ep.leaderboard)
			if err != nil {
				return err
			}
			defer snap.Close()
			top, err := snap.Top(n)
			if err != nil {
				return err
			}
			var w = tabwriter.NewWriter(cmd.OutOrStdout(), 2, 8, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "RANK\tCUSTOMER\tACCOUNT\tBALANCE\t")
			for i, r := range top {
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\t\n", i+1, r.CustomerId, r.AccountId, cents(r.BalanceCents))
			}
			if err = w.Flush(); err != nil {
				return err
			}
			printCheckpoints(cmd.OutOrStdout(), snap)
			return nil
		},
	}
	cmd.Flags().IntVarP(&n, "n", "n", 10, "how many")
	return cmd
}

func newCheckCmd(ep *endpoints) *cobra.Command {
	var record string
	var top int
	var wait time.Duration
	var cmd = &cobra.Command{
		Use:   "check",
		Short: "Check the ledger, the leaderboard, the BalanceChanged events and the dead letters against a load's record",
		Long: `check compares, with the outcome that --record says the load must have: every
balance and customer's activity of the ledger, every standing and rank of the
leaderboard, and the BalanceChanged events read read-committed (each account's
versions 1, 2, 3, ... each once); that the holds released are exactly those of
the orders never paid, each once (no hold is left, none of a paid order
released), that every account fell idle since its last change, once, and
that the ledger's dead letters are exactly the invalid payments, each once,
at their journals and offsets. It prints the top balances, then OK, or FAIL
with what differs, and exits non-zero on FAIL.

The ledger releases holds its hold window after their orders, and accounts
fall idle its RecentAccount's ttl after their last changes: --wait checks
again, every second, while it finds differences, for up to that long.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rec, err = load.ReadRecord(record)
			if err != nil {
				return err
			}
			var out = cmd.OutOrStdout()
			var deadline = time.Now().Add(wait)
			problems, err := runCheck(cmd.Context(), out, ep, rec, top)
			for err == nil && len(problems) != 0 && time.Now().Before(deadline) {
				fmt.Fprintf(out, "%d differences (the first: %s); checking again\n", len(problems), problems[0])
				select {
				case <-cmd.Context().Done():
					return cmd.Context().Err()
				case <-time.After(time.Second):
				}
				problems, err = runCheck(cmd.Context(), io.Discard, ep, rec, top)
			}
			if err != nil {
				return err
			}
			if len(problems) != 0 {
				for _, p := range problems {
					fmt.Fprintln(out, "  "+p)
				}
				fmt.Fprintln(out, "FAIL")
				return errors.New("the consumers' state differs from the record")
			}
			fmt.Fprintf(out, "OK: %d balances of %d customers, their activity, the leaderboard, %d events (%d releases of unpaid orders' holds), %d idle accounts and %d dead letters are as recorded\n",
				len(rec.Balances), len(rec.Activity), rec.Changes(), len(rec.Unpaid), len(rec.Balances), len(rec.Poison))
			return nil
		},
	}
	cmd.Flags().StringVar(&record, "record", "bank-record.json", "record written by bankctl publish")
	cmd.Flags().IntVarP(&top, "n", "n", 5, "how many top balances to print")
	cmd.Flags().DurationVar(&wait, "wait", 0, "check again while there are differences, for up to this long")
	return cmd
}

// runCheck prints the leaderboard's top balances beside the recorded ones,
// and returns every difference from the record.
func runCheck(ctx context.Context, out io.Writer, ep *endpoints, rec *load.Record, top int) ([]string, error) {
	var ledger, err = ep.snapshot(ctx, "ledger.address", ep.ledger)
	if err != nil {
		return nil, err
	}
	defer ledger.Close()
	leaderboard, err := ep.snapshot(ctx, "leaderboard.address", ep.leaderboard)
	if err != nil {
		return nil, err
	}
	defer leaderboard.Close()
	jc, err := ep.journals()
	if err != nil {
		return nil, err
	}
	events, err := inspect.Events(ctx, jc)
	if err != nil {
		return nil, err
	}

	ranks, err := leaderboard.Top(top)
	if err != nil {
		return nil, err
	}
	var want = rec.Top(top)
	var w = tabwriter.NewWriter(out, 2, 8, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "RANK\tLEADERBOARD\t\tRECORD\t\t")
	for i := range max(len(ranks), len(want)) {
		var got, exp = "\t", "\t"
		if i < len(ranks) {
			got = fmt.Sprintf("%s/%s\t%s", ranks[i].CustomerId, ranks[i].AccountId, cents(ranks[i].BalanceCents))
		}
		if i < len(want) {
			exp = fmt.Sprintf("%s/%s\t%s", want[i].Customer, want[i].Account, cents(want[i].Cents))
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t\n", i+1, got, exp)
	}
	if err = w.Flush(); err != nil {
		return nil, err
	}

	var problems []string
	p, err := check.Ledger(rec, ledger)
	if err != nil {
		return nil, err
	}
	problems = append(problems, p...)
	if p, err = check.Leaderboard(rec, leaderboard); err != nil {
		return nil, err
	}
	problems = append(problems, p...)
	problems = append(problems, check.Events(rec, events)...)
	dead, err := inspect.DeadLetters(ctx, jc)
	if err != nil {
		return nil, err
	}
	if p, err = check.DeadLetters(rec, dead, func(j pb.Journal, o pb.Offset) (message.Message, error) {
		return inspect.MessageAt(ctx, jc, j, o)
	}); err != nil {
		return nil, err
	}
	return append(problems, p...), nil
}

// printCheckpoints prints through which offsets each shard's state is.
func printCheckpoints(out io.Writer, snap *inspect.Snapshot) {
	for _, sh := range snap.Shards {
		var parts []string
		for j, src := range sh.Checkpoint.Sources {
			parts = append(parts, fmt.Sprintf("%s@%d", j, src.ReadThrough))
		}
		fmt.Fprintf(out, "(shard %s as of %s)\n", sh.Spec.Id, strings.Join(sortStrings(parts), ", "))
	}
}

// cents formats an amount of cents as a decimal amount.
func cents(c int64) string {
	var sign = ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

// bytesString formats a number of bytes.
func bytesString(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
