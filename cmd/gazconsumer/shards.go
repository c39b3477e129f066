package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/allocator"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.uber.org/zap"
	"google.golang.org/protobuf/encoding/protojson"
)

func newShardsCmd() *cobra.Command {
	var cmd = &cobra.Command{
		Use:   "shards",
		Short: "Inspect the shards of a gazconsumer application",
	}
	cmd.AddCommand(newHintsCmd(), newRecoveryCmd())
	return cmd
}

type hintsFlags struct {
	etcd, prefix, shard string
}

func newHintsCmd() *cobra.Command {
	var f hintsFlags
	var cmd = &cobra.Command{
		Use:   "hints",
		Short: "Print the recovery-log hints of a shard, newest generation first",
		Long: `hints prints, as JSON, each stored generation of a shard's recovery-log hints:
the live files of its store and the log segments that hold them, which is what
a replica recovering the shard reads. (Gazette's GetHints RPC cannot carry
gazconsumer's hints, so the Shard API points here.)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runHints(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	f.register(cmd)
	return cmd
}

// register adds the flags naming a shard to cmd.
func (f *hintsFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.etcd, "etcd", envOr("ETCD_ADDRESS", "http://127.0.0.1:2379"), "etcd endpoint (env ETCD_ADDRESS)")
	cmd.Flags().StringVar(&f.prefix, "prefix", os.Getenv("CONSUMER_PREFIX"), "etcd prefix of the consumer application, e.g. /gazette/consumers/orders (env CONSUMER_PREFIX)")
	cmd.Flags().StringVar(&f.shard, "shard", "", "shard ID")
	_ = cmd.MarkFlagRequired("shard")
}

func runHints(ctx context.Context, out io.Writer, f hintsFlags) error {
	var spec, etcd, err = loadShard(ctx, f)
	if err != nil {
		return err
	}
	defer etcd.Close()

	gens, err := recoverylog.FetchHints(ctx, etcd, spec.HintPrimaryKey(), int(spec.HintBackups)+1)
	if err != nil {
		return err
	}
	for g, h := range gens {
		if h == nil {
			fmt.Fprintf(out, "# generation %d: none\n", g)
			continue
		}
		b, err := protojson.MarshalOptions{Multiline: true}.Marshal(h)
		if err != nil {
			return fmt.Errorf("encoding hints: %w", err)
		}
		fmt.Fprintf(out, "# generation %d\n%s\n", g, b)
	}
	return nil
}

// loadShard connects to etcd and reads the spec of the shard f names, which
// must have a recovery log. The caller closes the client.
func loadShard(ctx context.Context, f hintsFlags) (*pc.ShardSpec, *clientv3.Client, error) {
	if f.prefix == "" {
		return nil, nil, fmt.Errorf("--prefix is required")
	}
	var etcd, err = clientv3.New(clientv3.Config{Endpoints: []string{f.etcd}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to etcd %s: %w", f.etcd, err)
	}
	var spec, serr = shardSpec(ctx, etcd, f)
	if serr != nil {
		etcd.Close()
		return nil, nil, serr
	}
	return spec, etcd, nil
}

func shardSpec(ctx context.Context, etcd *clientv3.Client, f hintsFlags) (*pc.ShardSpec, error) {

	var ks = groupkeys.NewKeySpace(f.prefix)
	var key = allocator.ItemKey(ks, f.shard)
	resp, err := etcd.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("reading shard spec %s: %w", key, err)
	} else if len(resp.Kvs) == 0 {
		return nil, fmt.Errorf("shard %s: no spec at %s", f.shard, key)
	}
	var spec pc.ShardSpec
	if err = spec.Unmarshal(resp.Kvs[0].Value); err != nil {
		return nil, fmt.Errorf("decoding shard spec %s: %w", key, err)
	} else if spec.RecoveryLogPrefix == "" {
		return nil, fmt.Errorf("shard %s has no recovery log", f.shard)
	}
	return &spec, nil
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
