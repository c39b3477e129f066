package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/gazconsumer/gazconsumer/internal/brokerconn"
	"github.com/gazconsumer/gazconsumer/recoverylog"
	"github.com/spf13/cobra"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/broker/stores"
	"go.gazette.dev/core/broker/stores/fs"
)

type recoveryFlags struct {
	hintsFlags
	broker, fileRoot string
	prune            bool
}

func newRecoveryCmd() *cobra.Command {
	var f recoveryFlags
	var cmd = &cobra.Command{
		Use:   "recovery",
		Short: "Report what recovering a shard costs, and prune its recovery log",
		Long: `recovery reports, for a shard, the live state of its store (the files its newest
hints hold), the bytes a replica recovering it would read (the hinted segments,
then the log after the hints), and the fragments of its recovery log which no
stored generation of hints needs: those pruning may delete. With --prune, it
deletes them from their fragment stores: file:// stores, rooted at --file-root
(cloud stores are left to their own tooling, with the fragments listed).

Log compaction (store/rocks, recoverylog.Recorder.Compact) keeps what a recovery
reads close to the live state, so that older fragments become prunable.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRecovery(cmd.Context(), cmd.OutOrStdout(), f)
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&f.broker, "broker", envOr("BROKER_ADDRESS", "http://127.0.0.1:8080"), "Gazette broker endpoint (env BROKER_ADDRESS)")
	cmd.Flags().StringVar(&f.fileRoot, "file-root", os.Getenv("BROKER_FILE_ROOT"), "filesystem path which roots file:// fragment stores, to prune them (env BROKER_FILE_ROOT)")
	cmd.Flags().BoolVar(&f.prune, "prune", false, "delete the prunable fragments from their stores")
	return cmd
}

func runRecovery(ctx context.Context, out io.Writer, f recoveryFlags) error {
	var spec, etcd, err = loadShard(ctx, f.hintsFlags)
	if err != nil {
		return err
	}
	defer etcd.Close()
	gens, err := recoverylog.FetchHints(ctx, etcd, spec.HintPrimaryKey(), int(spec.HintBackups)+1)
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

	brokerconn.RegisterDispatcher("")
	jc, conn, err := brokerconn.Dial(pb.Endpoint(f.broker), pb.NoopDispatchRouter{})
	if err != nil {
		return err
	}
	defer conn.Close()
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
		fmt.Fprintf(w, "hints\tnone stored: a recovery reads the whole log, %s\n", humanBytes(head))
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
	fmt.Fprintf(w, "needed from\toffset %d, by %d stored generations of hints\n", recoverylog.NeededFrom(kept...), len(kept))

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
	}

	for _, fr := range prunable {
		if fr.BackingStore != "" && fr.BackingStore.URL().Scheme != "file" {
			return fmt.Errorf("--prune deletes fragments of file:// stores only, not of %s: delete the fragments listed above with its own tooling", fr.BackingStore)
		}
	}
	if f.fileRoot == "" {
		return fmt.Errorf("--prune needs --file-root, the root of the file:// fragment store")
	}
	registerStores(f.fileRoot)
	removed, err := recoverylog.Prune(ctx, jc, log, kept...)
	fmt.Fprintf(out, "pruned %d fragments\n", len(removed))
	return err
}

// registerStores registers the provider of file:// fragment stores, rooted
// at fileRoot. (Those of cloud stores would add their SDKs' large module
// graphs to every module which uses this command as a tool.)
func registerStores(fileRoot string) {
	fs.FileSystemStoreRoot = fileRoot
	stores.RegisterProviders(map[string]stores.Constructor{"file": fs.New})
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
