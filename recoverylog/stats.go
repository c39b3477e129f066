package recoverylog

import pb "go.gazette.dev/core/broker/protocol"

// Stats describe what recovering a store from Hints costs.
type Stats struct {
	// LiveFiles and LiveBytes are the files of the hinted store, and their
	// bytes (properties included): the store's live state.
	LiveFiles int
	LiveBytes int64
	// Segments are the log ranges which a player of the hints reads before
	// the hints' end, and HintedBytes their bytes.
	Segments    int
	HintedBytes int64
	// AdoptedFiles are the live files whose content is that of a node of
	// another log (see Adopt), and AdoptedBytes the bytes of other logs a
	// player reads for them.
	AdoptedFiles int
	AdoptedBytes int64
	// NeededFrom is the lowest log offset which a player of the hints reads.
	NeededFrom int64
	// End is the log offset at which the hints end.
	End int64
}

// StatsOf returns the Stats of h.
func StatsOf(h *Hints) Stats {
	var s = Stats{NeededFrom: NeededFrom(pb.Journal(h.Log), h), End: h.NextOffset}
	for _, ln := range h.LiveNodes {
		s.LiveFiles++
		s.LiveBytes += ln.Size
		if ln.Source != nil {
			s.AdoptedFiles++
		}
		for src := ln.Source; src != nil; src = src.GetNode().GetSource() {
			for _, r := range hintedRanges(sourceHints(src)) {
				s.AdoptedBytes += r.EndOffset - r.FirstOffset
			}
		}
	}
	for _, c := range h.Properties {
		s.LiveFiles++
		s.LiveBytes += int64(len(c))
	}
	for _, r := range hintedRanges(h) {
		s.Segments++
		s.HintedBytes += r.EndOffset - r.FirstOffset
	}
	return s
}
