package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/gazconsumer/gazconsumer/internal/clientflags"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
)

func newShardsCmd() *cobra.Command {
	var cmd = &cobra.Command{
		Use:   "shards",
		Short: "Inspect the shards of a gazconsumer application, and prune their recovery logs",
		Long: `shards reads the shards of a consumer group (under --etcd.prefix, as its members
lay them out) and their recovery logs, with the flags and environment of the
members (--etcd.address, --broker.address, their TLS and authorization). Each
subcommand takes one shard (--shard) or every shard a label selector matches
(-l, as gazctl's), and maps to gazctl's:

  gazconsumer shards hints      gazctl shards hints (our hints are our own)
  gazconsumer shards recovery   what a recovery of each shard reads
  gazconsumer shards prune      gazctl shards prune`,
	}
	cmd.AddCommand(newHintsCmd(), newRecoveryCmd(), newPruneCmd())
	return cmd
}

// shardsFlags select shards of a consumer group, and reach etcd and brokers.
type shardsFlags struct {
	clientflags.Flags
	shard, selector string
}

// register adds the flags to cmd, with the former names of some kept as
// deprecated aliases.
func (f *shardsFlags) register(cmd *cobra.Command) {
	var fl = cmd.Flags()
	f.Flags.Register(fl)
	fl.StringVar(&f.shard, "shard", "", "ID of the shard (or -l)")
	fl.StringVarP(&f.selector, "selector", "l", "", "label selector of the shards, as gazctl's -l (e.g. id=ledger-00, or app=bank)")
	for _, alias := range []struct {
		name string
		to   *string
		now  string
	}{
		{"etcd", &f.EtcdAddress, "etcd.address"},
		{"prefix", &f.EtcdPrefix, "etcd.prefix"},
		{"broker", &f.BrokerAddress, "broker.address"},
		{"file-root", &f.FileRoot, "broker.file-root"},
	} {
		fl.StringVar(alias.to, alias.name, *alias.to, "deprecated: use --"+alias.now)
		_ = fl.MarkDeprecated(alias.name, "use --"+alias.now)
	}
}

// selectShards connects to etcd and returns the specs of the shards f
// selects, in id order, and the client, which the caller closes. Each must
// have a recovery log.
func (f shardsFlags) selectShards(ctx context.Context) ([]*pc.ShardSpec, *clientv3.Client, error) {
	if f.EtcdPrefix == "" {
		return nil, nil, errors.New("--etcd.prefix is required: the prefix of the consumer group, e.g. /gazette/consumers/ledger")
	}
	var sel pb.LabelSelector
	switch {
	case f.shard != "" && f.selector != "":
		return nil, nil, errors.New("--shard and -l go apart: give one")
	case f.shard != "":
		sel = pb.LabelSelector{Include: pb.MustLabelSet("id", f.shard)}
	case f.selector != "":
		var err error
		if sel, err = pb.ParseLabelSelector(f.selector); err != nil {
			return nil, nil, fmt.Errorf("-l %q: %w", f.selector, err)
		}
	default:
		return nil, nil, errors.New("--shard or -l is required")
	}
	var etcd, err = f.Etcd()
	if err != nil {
		return nil, nil, err
	}
	var ks = groupkeys.NewKeySpace(f.EtcdPrefix)
	var prefix = ks.Root + allocator.ItemsPrefix
	resp, err := etcd.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		etcd.Close()
		return nil, nil, fmt.Errorf("reading the shard specs under %s (etcd %s): %w", prefix, f.EtcdAddress, err)
	}
	var specs []*pc.ShardSpec
	for _, kv := range resp.Kvs {
		var spec = new(pc.ShardSpec)
		if err = spec.Unmarshal(kv.Value); err != nil {
			etcd.Close()
			return nil, nil, fmt.Errorf("decoding the shard spec at %s: %w", kv.Key, err)
		}
		if sel.Matches(spec.LabelSetExt(pb.LabelSet{})) {
			specs = append(specs, spec)
		}
	}
	if len(specs) == 0 {
		etcd.Close()
		if f.shard != "" {
			return nil, nil, fmt.Errorf("shard %s: no spec at %s%s", f.shard, prefix, f.shard)
		}
		return nil, nil, fmt.Errorf("no shard under %s matches -l %q", prefix, f.selector)
	}
	for _, spec := range specs {
		if spec.RecoveryLogPrefix == "" {
			etcd.Close()
			return nil, nil, fmt.Errorf("shard %s has no recovery log", spec.Id)
		}
	}
	slices.SortFunc(specs, func(a, b *pc.ShardSpec) int { return strings.Compare(a.Id.String(), b.Id.String()) })
	return specs, etcd, nil
}

func newHintsCmd() *cobra.Command {
	var f shardsFlags
	var cmd = &cobra.Command{
		Use:   "hints (--shard ID | -l SELECTOR)",
		Short: "Print the recovery-log hints of shards, newest generation first",
		Long: `hints prints, as JSON, each stored generation of each shard's recovery-log
hints: the live files of its store and the log segments that hold them, which
is what a replica recovering the shard reads. (Gazette's GetHints RPC cannot
carry gazconsumer's hints, so the Shard API points here.)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHints(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	f.register(cmd)
	return cmd
}

func runHints(ctx context.Context, out io.Writer, f shardsFlags) error {
	var specs, etcd, err = f.selectShards(ctx)
	if err != nil {
		return err
	}
	defer etcd.Close()
	for _, spec := range specs {
		gens, err := recoverylog.FetchHints(ctx, etcd, spec.HintPrimaryKey(), int(spec.HintBackups)+1)
		if err != nil {
			return fmt.Errorf("shard %s: %w", spec.Id, err)
		}
		if len(specs) > 1 {
			fmt.Fprintf(out, "# shard %s\n", spec.Id)
		}
		for g, h := range gens {
			if h == nil {
				fmt.Fprintf(out, "# generation %d: none\n", g)
				continue
			}
			b, err := protojson.MarshalOptions{Multiline: true}.Marshal(h)
			if err != nil {
				return fmt.Errorf("shard %s: encoding hints: %w", spec.Id, err)
			}
			fmt.Fprintf(out, "# generation %d\n%s\n", g, b)
		}
	}
	return nil
}

// envOr returns the value of environment variable name, or fallback if it
// is unset or empty.
func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
