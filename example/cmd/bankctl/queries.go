package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	"github.com/gazconsumer/gazconsumer/runtime/partition"
	rquery "github.com/gazconsumer/gazconsumer/runtime/query"
)

// queryClient returns a client of the queries services of the consumer
// app, over the consumer TLS and authorized by the consumer keys: one
// calling the member at addr (a member of the ledger or the leaderboard),
// which routes each call to the primary of its shard, or with routed one
// routing each call itself, from the consumer's shards, assignments and
// members in etcd under /gazette/consumers/<app> and the partition
// journals the brokers list.
func (e *endpoints) queryClient(ctx context.Context, app, flag, addr string, routed bool) (*rquery.Client, error) {
	var sec, err = security("consumer", e.consumerTLS, e.consumerAuthKeys)
	if err != nil {
		return nil, err
	}
	if routed {
		var etcd, err = e.etcdClient()
		if err != nil {
			return nil, err
		} else if etcd == nil {
			return nil, fmt.Errorf("--routed needs --etcd.address")
		}
		jc, err := e.journals()
		if err != nil {
			return nil, err
		}
		ks, err := groupkeys.Watch(ctx, etcd, "/gazette/consumers/"+app)
		if err != nil {
			return nil, err
		}
		var c = rquery.NewRoutedClient(rquery.NewRouter(ks, partition.NewWatched(ctx, jc)), rquery.Dialer(sec.TLS), sec.Auth)
		e.closers = append(e.closers, c)
		return c, nil
	}
	if addr == "" {
		return nil, fmt.Errorf("--%s is required (or --routed)", flag)
	}
	conn, err := rquery.Dialer(sec.TLS)(pb.Endpoint(addr))
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flag, err)
	}
	e.closers = append(e.closers, conn)
	return rquery.NewClient(conn, sec.Auth), nil
}

func newBalancesCmd(ep *endpoints) *cobra.Command {
	var customer string
	var timeout time.Duration
	var routed bool
	var cmd = &cobra.Command{
		Use:   "balances",
		Short: "Print a customer's balances and activity, live, from the ledger's queries service",
		Long: `balances asks the ledger (LedgerQueries, through the member at --ledger.address,
which routes the calls to the primary of the customer's shard) for the
customer's balances, page by page, and activity: the shard's committed state,
as of its last durable transaction. bankctl inspect balances prints every
customer's, offline.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if customer == "" {
				return fmt.Errorf("--customer is required (bankctl inspect balances prints every customer's, offline)")
			}
			var ctx, cancel = context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var qc, err = ep.queryClient(ctx, "ledger", "ledger.address", ep.ledger, routed)
			if err != nil {
				return err
			}
			var ledger = bankv1.NewLedgerQueriesClient(qc)
			var w = tabwriter.NewWriter(cmd.OutOrStdout(), 2, 8, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "CUSTOMER\tACCOUNT\tBALANCE\tCHANGES\t")
			var req = &bankv1.ListBalancesRequest{CustomerId: customer}
			for {
				var page, err = ledger.ListBalances(ctx, req)
				if err != nil {
					return fmt.Errorf("ListBalances: %w", err)
				}
				for _, b := range page.Balances {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t\n", b.CustomerId, b.AccountId, cents(b.BalanceCents), b.Version)
				}
				if page.NextPageToken == "" {
					break
				}
				req.PageToken = page.NextPageToken
			}
			a, err := ledger.GetActivity(ctx, &bankv1.GetActivityRequest{CustomerId: customer})
			if status.Code(err) == codes.NotFound {
				fmt.Fprintf(w, "(customer %s has no activity yet)\t\t\t\t\n", customer)
				return w.Flush()
			} else if err != nil {
				return fmt.Errorf("GetActivity: %w", err)
			}
			fmt.Fprintln(w, "\t\t\t\t")
			fmt.Fprintln(w, "CUSTOMER\tORDERS\tORDERED\tPAYMENTS\tPAID\tLAST ACTIVITY\t")
			fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%s\t%s\t\n", a.CustomerId, a.Orders, cents(a.OrderedCents),
				a.Payments, cents(a.PaidCents), a.LastAt.AsTime().Format(time.DateTime))
			return w.Flush()
		},
	}
	cmd.Flags().StringVar(&customer, "customer", "", "the customer whose balances to print")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	cmd.Flags().BoolVar(&routed, "routed", false, "route the calls to the customer's shard's primary from etcd (--etcd.address), rather than through --ledger.address")
	return cmd
}

func newTopCmd(ep *endpoints) *cobra.Command {
	var n int
	var timeout time.Duration
	var routed bool
	var cmd = &cobra.Command{
		Use:   "top",
		Short: "Print the largest balances, live, from the leaderboard's queries service",
		Long: `top asks the leaderboard (LeaderboardQueries.Top, through the member at
--leaderboard.address, which asks every leaderboard shard and merges their
ranks) for the -n largest balances: each shard's committed state, as of its
last durable transaction.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ctx, cancel = context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			var qc, err = ep.queryClient(ctx, "leaderboard", "leaderboard.address", ep.leaderboard, routed)
			if err != nil {
				return err
			}
			var board = bankv1.NewLeaderboardQueriesClient(qc)
			var w = tabwriter.NewWriter(cmd.OutOrStdout(), 2, 8, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(w, "RANK\tCUSTOMER\tACCOUNT\tBALANCE\t")
			var req = &bankv1.TopRequest{Limit: int32(min(n, 1000))}
			for rank := 0; rank < n; {
				var page, err = board.Top(ctx, req)
				if err != nil {
					return fmt.Errorf("Top: %w", err)
				}
				for _, r := range page.Ranks {
					if rank++; rank <= n {
						fmt.Fprintf(w, "%d\t%s\t%s\t%s\t\n", rank, r.CustomerId, r.AccountId, cents(r.BalanceCents))
					}
				}
				if page.NextPageToken == "" {
					break
				}
				req.PageToken = page.NextPageToken
			}
			return w.Flush()
		},
	}
	cmd.Flags().IntVarP(&n, "n", "n", 10, "how many")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	cmd.Flags().BoolVar(&routed, "routed", false, "call a member found in etcd (--etcd.address), rather than --leaderboard.address")
	return cmd
}
