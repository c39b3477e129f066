package recoverylog

import (
	"context"
	"fmt"

	"go.gazette.dev/core/broker/client"
	"go.gazette.dev/core/broker/fragment"
	pb "go.gazette.dev/core/broker/protocol"
)

// NeededFrom returns the lowest offset of log which a player of any of hints
// reads: a player of hints of log reads the segments of its live nodes and
// the log from the hints' end; a player of hints of any log reads the
// segments of the nodes of log which its nodes adopt, through any chain of
// adoptions. A nil hints means a player of log reads it from its start, and
// so do hints none of which need log.
func NeededFrom(log pb.Journal, hints ...*Hints) int64 {
	var from int64 = -1
	var lower = func(segs []*Segment) {
		for _, s := range segs {
			if from == -1 || s.FirstOffset < from {
				from = s.FirstOffset
			}
		}
	}
	for _, h := range hints {
		if h == nil {
			return 0
		} else if h.Log == log.String() {
			lower([]*Segment{{FirstOffset: h.NextOffset}})
		}
		for _, ln := range h.LiveNodes {
			if h.Log == log.String() {
				lower(ln.Segments)
			}
			for src := ln.Source; src != nil; src = src.GetNode().GetSource() {
				if src.Log == log.String() {
					lower(src.GetNode().GetSegments())
				}
			}
		}
	}
	return max(from, 0)
}

// Prunable returns the fragments of journal which no player of any of hints
// reads: they end at or before NeededFrom(journal, hints...). Pass every
// generation of hints of journal which may still be used, backups included,
// and those of every log whose nodes may adopt nodes of journal (the shards
// forked from its shard's files).
func Prunable(ctx context.Context, jc pb.RoutedJournalClient, journal pb.Journal, hints ...*Hints) ([]pb.Fragment, error) {
	if len(hints) == 0 {
		return nil, nil
	}
	var from = NeededFrom(journal, hints...)
	var resp, err = client.ListAllFragments(ctx, jc, pb.FragmentsRequest{Journal: journal})
	if err != nil {
		return nil, fmt.Errorf("listing fragments of %s: %w", journal, err)
	}
	var out []pb.Fragment
	for _, f := range resp.Fragments {
		if f.Spec.End <= from {
			out = append(out, f.Spec)
		}
	}
	return out, nil
}

// Prune deletes from their stores the fragments of journal that no player of
// any of hints reads (see Prunable), and returns them. Pass every generation
// of hints which may still be used, those of logs which adopt journal's
// nodes too. Fragments which aren't persisted to a
// store yet are left to a later Prune. The process must have registered the
// providers of the fragment stores (stores.RegisterProviders), as brokers
// and gazctl do.
func Prune(ctx context.Context, jc pb.RoutedJournalClient, journal pb.Journal, hints ...*Hints) ([]pb.Fragment, error) {
	var prunable, err = Prunable(ctx, jc, journal, hints...)
	if err != nil {
		return nil, err
	}
	var removed []pb.Fragment
	for _, f := range prunable {
		if f.BackingStore == "" {
			continue // Not persisted yet.
		}
		if err = fragment.Remove(ctx, f); err != nil {
			return removed, fmt.Errorf("pruning %s fragment [%d, %d) from %s: %w", journal, f.Begin, f.End, f.BackingStore, err)
		}
		removed = append(removed, f)
	}
	return removed, nil
}
