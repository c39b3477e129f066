package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"

	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/gazconsumer/gazconsumer/runtime/groupkeys"
	"go.gazette.dev/core/allocator"
)

type recoveryFlags struct {
	shardsFlags
	prune, dryRun bool
}

func newRecoveryCmd() *cobra.Command {
	var f recoveryFlags
	var cmd = &cobra.Command{
		Use:   "recovery (--shard ID | -l SELECTOR)",
		Short: "Report what recovering shards costs",
		Long: `recovery reports, for each shard, the live state of its store (the files its
newest hints hold), the bytes a replica recovering it would read (the hinted
segments, then the log after the hints), and the fragments of its recovery log
which no stored generation of hints needs: those "gazconsumer shards prune"
deletes (--prune does it here too).

Log compaction (store/rocks, recoverylog.Recorder.Compact) keeps what a recovery
reads close to the live state, so that older fragments become prunable.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRecovery(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.prune, "prune", false, "delete the prunable fragments from their stores, as gazconsumer shards prune")
	return cmd
}

func newPruneCmd() *cobra.Command {
	var f recoveryFlags
	var cmd = &cobra.Command{
		Use:   "prune (--shard ID | -l SELECTOR) [--dry-run]",
		Short: "Delete the fragments of shards' recovery logs that no stored hints need",
		Long: `prune deletes, for each shard, the fragments of its recovery log which no stored
generation of its hints needs (a recovery from any of them reads nothing
before), from their fragment stores: file:// (rooted at --broker.file-root),
s3://, gs://, azure:// and azure-ad://, through Gazette's own store code and
credentials (as gazctl shards prune does: AWS_* variables or profiles, Google
application credentials, Azure's). Fragments not yet persisted are left to a
later run. With --dry-run, it lists them and deletes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.prune = true
			return runRecovery(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "list what would be pruned, and delete nothing")
	return cmd
}

func runRecovery(ctx context.Context, out io.Writer, f recoveryFlags) error {
	var specs, etcd, err = f.selectShards(ctx)
	if err != nil {
		return err
	}
	defer etcd.Close()
	jc, conn, err := f.Brokers()
	if err != nil {
		return err
	}
	defer conn.Close()
	adopting, err := adoptingHints(ctx, etcd, f.EtcdPrefix)
	if err != nil {
		return err
	}
	for i, spec := range specs {
		if i != 0 {
			fmt.Fprintln(out)
		}
		if err = recoveryOf(ctx, out, f, etcd, jc, spec, adopting); err != nil {
			return fmt.Errorf("shard %s: %w", spec.Id, err)
		}
	}
	return nil
}

// adoptingHints returns the stored hints, of every generation, of the shards
// of the consumer group under prefix whose files adopt nodes of other logs:
// a shard forked from another's files reads their bytes from the other's
// recovery log (see recoverylog.Adopt), which keeps them for it.
func adoptingHints(ctx context.Context, etcd *clientv3.Client, prefix string) (map[pc.ShardID][]*recoverylog.Hints, error) {
	var ks = groupkeys.NewKeySpace(prefix)
	var items = ks.Root + allocator.ItemsPrefix
	var resp, err = etcd.Get(ctx, items, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("reading the shard specs under %s: %w", items, err)
	}
	var out = make(map[pc.ShardID][]*recoverylog.Hints)
	for _, kv := range resp.Kvs {
		var spec = new(pc.ShardSpec)
		if err = spec.Unmarshal(kv.Value); err != nil {
			return nil, fmt.Errorf("decoding the shard spec at %s: %w", kv.Key, err)
		} else if spec.RecoveryLogPrefix == "" {
			continue
		}
		gens, err := recoverylog.FetchHints(ctx, etcd, spec.HintPrimaryKey(), int(spec.HintBackups)+1)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", spec.Id, err)
		}
		for _, h := range gens {
			if h != nil && slices.ContainsFunc(h.LiveNodes, func(ln *recoverylog.LiveNode) bool { return ln.Source != nil }) {
				out[spec.Id] = append(out[spec.Id], h)
			}
		}
	}
	return out, nil
}

// recoveryOf reports on the recovery of shard spec, and prunes its log if
// f says so, keeping what shards that adopt its nodes need (adopting).
func recoveryOf(ctx context.Context, out io.Writer, f recoveryFlags, etcd *clientv3.Client, jc pb.RoutedJournalClient, spec *pc.ShardSpec,
	adopting map[pc.ShardID][]*recoverylog.Hints) error {
	var gens, err = recoverylog.FetchHints(ctx, etcd, spec.HintPrimaryKey(), int(spec.HintBackups)+1)
	if err != nil {
		return err
	}
	var log = spec.RecoveryLog()
	var kept []*recoverylog.Hints
	for _, h := range gens {
		if h != nil {
			kept = append(kept, h)
		}
	}
	frags, err := client.ListAllFragments(ctx, jc, pb.FragmentsRequest{Journal: log})
	if err != nil {
		return fmt.Errorf("listing fragments of %s: %w", log, err)
	}
	var head int64
	for _, fr := range frags.Fragments {
		head = max(head, fr.Spec.End)
	}

	var w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "shard\t%s\n", spec.Id)
	fmt.Fprintf(w, "recovery log\t%s, written through offset %d, in %d fragments\n", log, head, len(frags.Fragments))
	if len(kept) == 0 {
		fmt.Fprintf(w, "hints\tnone stored: a recovery reads the whole log, %s; nothing is prunable\n", humanBytes(head))
		return w.Flush()
	}
	var st = recoverylog.StatsOf(kept[0])
	var after = max(0, head-st.End)
	fmt.Fprintf(w, "live state\t%s in %d files\n", humanBytes(st.LiveBytes), st.LiveFiles)
	fmt.Fprintf(w, "recovery reads\t%s: %s in %d hinted segments, then %s of log after the hints (offset %d)\n",
		humanBytes(st.HintedBytes+after), humanBytes(st.HintedBytes), st.Segments, humanBytes(after), st.End)
	if st.LiveBytes != 0 {
		fmt.Fprintf(w, "read / live\t%.2f\n", float64(st.HintedBytes+after)/float64(st.LiveBytes))
	}
	if st.AdoptedFiles != 0 {
		fmt.Fprintf(w, "adopted\t%d files, whose %s a recovery reads from the logs they're adopted from\n", st.AdoptedFiles, humanBytes(st.AdoptedBytes))
	}
	var own = len(kept)
	for _, id := range slices.Sorted(maps.Keys(adopting)) {
		var hs = slices.DeleteFunc(slices.Clone(adopting[id]), func(h *recoverylog.Hints) bool { return !adopts(h, log) })
		if id == spec.Id || len(hs) == 0 {
			continue
		}
		kept = append(kept, hs...)
		fmt.Fprintf(w, "adopted by\tshard %s, whose files read this log from offset %d\n", id, recoverylog.NeededFrom(log, hs...))
	}
	fmt.Fprintf(w, "needed from\toffset %d, by %d stored generations of hints, and %d of shards adopting its files\n",
		recoverylog.NeededFrom(log, kept...), own, len(kept)-own)

	prunable, err := recoverylog.Prunable(ctx, jc, log, kept...)
	if err != nil {
		return err
	}
	var n int64
	for _, fr := range prunable {
		n += fr.ContentLength()
	}
	fmt.Fprintf(w, "prunable\t%d fragments, %s\n", len(prunable), humanBytes(n))
	for _, fr := range prunable {
		var store = string(fr.BackingStore)
		if store == "" {
			store = "(not persisted yet)"
		}
		fmt.Fprintf(w, "\t[%d, %d) %s\n", fr.Begin, fr.End, store)
	}
	if err = w.Flush(); err != nil || !f.prune {
		return err
	} else if f.dryRun {
		fmt.Fprintf(out, "dry run: pruned nothing\n")
		return nil
	}
	removed, err := recoverylog.Prune(ctx, jc, log, kept...)
	fmt.Fprintf(out, "pruned %d fragments\n", len(removed))
	return err
}

// adopts reports whether a node of h adopts a node of log, through any
// chain of adoptions.
func adopts(h *recoverylog.Hints, log pb.Journal) bool {
	for _, ln := range h.LiveNodes {
		for src := ln.Source; src != nil; src = src.GetNode().GetSource() {
			if src.Log == log.String() {
				return true
			}
		}
	}
	return false
}

// humanBytes formats n bytes for people.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
