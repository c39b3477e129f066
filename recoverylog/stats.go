package recoverylog

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
	// NeededFrom is the lowest log offset which a player of the hints reads.
	NeededFrom int64
	// End is the log offset at which the hints end.
	End int64
}

// StatsOf returns the Stats of h.
func StatsOf(h *Hints) Stats {
	var s = Stats{NeededFrom: NeededFrom(h), End: h.NextOffset}
	for _, ln := range h.LiveNodes {
		s.LiveFiles++
		s.LiveBytes += ln.Size
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
