// Package inspect reads the state and output of the example bank's
// consumers offline, typed, without disturbing them: an inspection tool
// (bankctl inspect, bankctl check), where live reads are the consumers'
// queries services (bankctl balances and top). Open lists an
// application's shards through the Shard API and plays each shard's
// recovery log into a local directory, read-only (rocks.PlayReadOnly):
// reads then go through the generated tables, as of each shard's last
// commit. Events reads the ledger's BalanceChanged events, read-committed,
// and DeadLetters its dead letters.
package inspect

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	bankv1 "github.com/gazconsumer/gazconsumer/example/gen/bank/v1"
	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/source"
	"github.com/gazconsumer/gazconsumer/store/rocks"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/auth"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// DialShards returns a client of the Shard API served at ep (a consumer
// member's address, as gazctl's --consumer.address), and its connection.
// An https:// member is dialed over TLS with sec.TLS (client certificate
// and trusted CA); sec.Auth authorizes each call.
func DialShards(ep pb.Endpoint, sec brokerconn.Security) (pc.ShardClient, *grpc.ClientConn, error) {
	if err := ep.Validate(); err != nil {
		return nil, nil, fmt.Errorf("consumer address: %w", err)
	}
	var creds = insecure.NewCredentials()
	if ep.URL().Scheme == "https" {
		var cfg = sec.TLS
		if cfg == nil {
			cfg = &tls.Config{}
		}
		creds = credentials.NewTLS(cfg)
	}
	var conn, err = grpc.NewClient(ep.GRPCAddr(), grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, nil, fmt.Errorf("dialing consumer %s: %w", ep, err)
	}
	var authorizer = sec.Auth
	if authorizer == nil {
		authorizer = auth.NewNoopAuth()
	}
	return pc.NewAuthShardClient(pc.NewShardClient(conn), authorizer), conn, nil
}

// Snapshot is the state of every shard of an application, each as of its
// last commit when the snapshot was opened.
type Snapshot struct {
	dir    string
	Shards []*Shard
}

// Shard is the state of one shard.
type Shard struct {
	Spec pc.ShardSpec
	// Store holds the shard's tables, read-only.
	Store *rocks.ReadOnly
	// Checkpoint tells through which offsets of its sources the state is.
	Checkpoint pc.Checkpoint
}

// Open lists the shards of the application served at sc and plays the
// recovery log of each into a new directory under dir ("" for the system's
// temporary directory). Etcd, if not nil, is where recovery-log hints are
// read from, so that only live log segments are read; without it the logs
// are played from their start.
func Open(ctx context.Context, sc pc.ShardClient, jc pb.RoutedJournalClient, etcd *clientv3.Client, dir string) (*Snapshot, error) {
	var list, err = sc.List(ctx, &pc.ListRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing shards: %w", err)
	} else if list.Status != pc.Status_OK {
		return nil, fmt.Errorf("listing shards: %s", list.Status)
	} else if len(list.Shards) == 0 {
		return nil, errors.New("listing shards: there are none (apply the shard specs)")
	}
	var s = &Snapshot{}
	if s.dir, err = os.MkdirTemp(dir, "bank-query-"); err != nil {
		return nil, err
	}
	for _, ls := range list.Shards {
		var sh, err = openShard(ctx, jc, etcd, ls.Spec, filepath.Join(s.dir, strings.ReplaceAll(ls.Spec.Id.String(), "/", "_")))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Shards = append(s.Shards, sh)
	}
	return s, nil
}

func openShard(ctx context.Context, jc pb.RoutedJournalClient, etcd *clientv3.Client, spec pc.ShardSpec, dir string) (*Shard, error) {
	var log = spec.RecoveryLog()
	if log == "" {
		return nil, fmt.Errorf("shard %s has no recovery log to read its state from", spec.Id)
	}
	var hints *recoverylog.Hints
	if etcd != nil {
		var all, err = recoverylog.FetchHints(ctx, etcd, spec.HintPrimaryKey(), int(spec.HintBackups)+1)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", spec.Id, err)
		}
		hints = all[0]
	}
	if err := os.Mkdir(dir, 0o750); err != nil {
		return nil, err
	}
	var store, err = rocks.PlayReadOnly(ctx, jc, log, hints, dir)
	if err != nil {
		return nil, fmt.Errorf("shard %s: %w", spec.Id, err)
	}
	cp, err := store.Checkpoint()
	if err != nil {
		store.Close()
		return nil, fmt.Errorf("shard %s: %w", spec.Id, err)
	}
	return &Shard{Spec: spec, Store: store, Checkpoint: cp}, nil
}

// Close closes the stores and removes their directories.
func (s *Snapshot) Close() {
	for _, sh := range s.Shards {
		sh.Store.Close()
	}
	_ = os.RemoveAll(s.dir)
}

// Balances returns the balance of every account, by customer and account.
func (s *Snapshot) Balances() ([]*bankv1.Balance, error) {
	var out []*bankv1.Balance
	for _, sh := range s.Shards {
		if err := bankv1.NewBalanceTable(sh.Store.KV()).Scan(func(b *bankv1.Balance) bool {
			out = append(out, b)
			return true
		}); err != nil {
			return nil, fmt.Errorf("shard %s: %w", sh.Spec.Id, err)
		}
	}
	slices.SortFunc(out, func(a, b *bankv1.Balance) int {
		return cmp.Or(cmp.Compare(a.CustomerId, b.CustomerId), cmp.Compare(a.AccountId, b.AccountId))
	})
	return out, nil
}

// Activities returns the activity of every customer, by customer.
func (s *Snapshot) Activities() ([]*bankv1.CustomerActivity, error) {
	var out []*bankv1.CustomerActivity
	for _, sh := range s.Shards {
		if err := bankv1.NewCustomerActivityTable(sh.Store.KV()).Scan(func(a *bankv1.CustomerActivity) bool {
			out = append(out, a)
			return true
		}); err != nil {
			return nil, fmt.Errorf("shard %s: %w", sh.Spec.Id, err)
		}
	}
	slices.SortFunc(out, func(a, b *bankv1.CustomerActivity) int { return cmp.Compare(a.CustomerId, b.CustomerId) })
	return out, nil
}

// Standings returns the leaderboard's latest balance of every account, by
// customer and account.
func (s *Snapshot) Standings() ([]*bankv1.Standing, error) {
	var out []*bankv1.Standing
	for _, sh := range s.Shards {
		if err := bankv1.NewStandingTable(sh.Store.KV()).Scan(func(st *bankv1.Standing) bool {
			out = append(out, st)
			return true
		}); err != nil {
			return nil, fmt.Errorf("shard %s: %w", sh.Spec.Id, err)
		}
	}
	slices.SortFunc(out, func(a, b *bankv1.Standing) int {
		return cmp.Or(cmp.Compare(a.CustomerId, b.CustomerId), cmp.Compare(a.AccountId, b.AccountId))
	})
	return out, nil
}

// Top returns the leaderboard's n largest balances, largest first: the
// first n ranks of each shard, merged. With n < 0, it returns every rank.
func (s *Snapshot) Top(n int) ([]*bankv1.Rank, error) {
	var out []*bankv1.Rank
	for _, sh := range s.Shards {
		var taken int
		if err := bankv1.NewRankTable(sh.Store.KV()).Scan(func(r *bankv1.Rank) bool {
			out = append(out, r)
			taken++
			return n < 0 || taken < n
		}); err != nil {
			return nil, fmt.Errorf("shard %s: %w", sh.Spec.Id, err)
		}
	}
	slices.SortFunc(out, func(a, b *bankv1.Rank) int {
		return cmp.Or(cmp.Compare(b.BalanceCents, a.BalanceCents), cmp.Compare(a.CustomerId, b.CustomerId), cmp.Compare(a.AccountId, b.AccountId))
	})
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out, nil
}

// Events reads every committed BalanceChanged event, read-committed as a
// consumer reads them, from each partition's start to its write head: an
// event the ledger published within a transaction that did not commit is
// not read, and an event appended twice is read once. Acknowledgements are
// left out. Events are returned by partition, in journal order.
func Events(ctx context.Context, jc pb.RoutedJournalClient) ([]*bankv1.BalanceChanged, error) {
	var sel = pb.LabelSelector{Include: pb.MustLabelSet(labels.MessageType, "gazconsumer.example.bank.v1.BalanceChanged")}
	var list, err = client.ListAllJournals(ctx, jc, pb.ListRequest{Selector: sel})
	if err != nil {
		return nil, fmt.Errorf("listing journals of BalanceChanged: %w", err)
	}
	var out []*bankv1.BalanceChanged
	for _, j := range list.Journals {
		var rr = client.NewRetryReader(ctx, jc, pb.ReadRequest{Journal: j.Spec.Name, Block: false})
		var it = message.NewReadCommittedIter(rr, bankv1.NewMessage, message.NewSequencer(nil, nil, 1024))
		for {
			var env, err = it.Next()
			if errors.Is(err, client.ErrOffsetNotYetAvailable) {
				break // The write head.
			} else if err != nil {
				return nil, fmt.Errorf("reading %s at offset %d: %w", j.Spec.Name, rr.Offset(), err)
			}
			if message.GetFlags(env.GetUUID()) == message.Flag_ACK_TXN {
				continue
			}
			out = append(out, env.Message.(*bankv1.BalanceChanged))
		}
	}
	return out, nil
}

// scanTable returns every row of the table opened by open, of every shard.
func scanTable[R any, T interface{ Scan(func(R) bool) error }](s *Snapshot, open func(runtime.KV) T) ([]R, error) {
	var out []R
	for _, sh := range s.Shards {
		if err := open(sh.Store.KV()).Scan(func(r R) bool {
			out = append(out, r)
			return true
		}); err != nil {
			return nil, fmt.Errorf("shard %s: %w", sh.Spec.Id, err)
		}
	}
	return out, nil
}

// Holds returns the ledger's holds of orders awaiting their payments.
func (s *Snapshot) Holds() ([]*bankv1.Hold, error) { return scanTable(s, bankv1.NewHoldTable) }

// RecentAccounts returns the ledger's accounts changed lately, not yet
// idle.
func (s *Snapshot) RecentAccounts() ([]*bankv1.RecentAccount, error) {
	return scanTable(s, bankv1.NewRecentAccountTable)
}

// IdleAccounts returns the ledger's record of when each account fell idle.
func (s *Snapshot) IdleAccounts() ([]*bankv1.IdleAccount, error) {
	return scanTable(s, bankv1.NewIdleAccountTable)
}

// DeadLetterJournal is the ledger's dead-letter journal (its shards' label
// gazconsumer.dev/dead-letter-journal, from ledger.proto's dead_letters).
const DeadLetterJournal pb.Journal = "bank/dead-letters/ledger"

// DeadLetters reads the ledger's dead letters, read-committed: each once.
func DeadLetters(ctx context.Context, jc pb.RoutedJournalClient) ([]source.Skipped, error) {
	return source.ListSkipped(ctx, jc, DeadLetterJournal)
}

// MessageAt reads the message of journal at offset begin, as its readers
// decode it (uncommitted: a dead letter's message is read so).
func MessageAt(ctx context.Context, jc pb.RoutedJournalClient, journal pb.Journal, begin pb.Offset) (message.Message, error) {
	var rr = client.NewRetryReader(ctx, jc, pb.ReadRequest{Journal: journal, Offset: begin})
	var env, err = message.NewReadUncommittedIter(rr, bankv1.NewMessage).Next()
	if err != nil {
		return nil, fmt.Errorf("reading %s at offset %d: %w", journal, begin, err)
	} else if env.Begin != begin {
		return nil, fmt.Errorf("%s has no message at offset %d (the next begins at %d)", journal, begin, env.Begin)
	}
	return env.Message, nil
}
