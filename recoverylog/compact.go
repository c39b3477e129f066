package recoverylog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Compaction is the policy of Recorder.Compact.
type Compaction struct {
	// Ratio of the log's needed span (from the first offset that hints need
	// to the head) to the live bytes, past which the log is compacted.
	// Zero or less never compacts.
	Ratio float64
	// MinSpan is the least needed span which is compacted, so that small
	// stores don't re-record their files for little gain.
	MinSpan int64
}

// DefaultCompaction compacts a log once it spans more than twice the live
// state, and at least 64 MiB.
var DefaultCompaction = Compaction{Ratio: 2, MinSpan: 64 << 20}

// CompactResult reports what a Compact did.
type CompactResult struct {
	// Span and LiveBytes before the compaction.
	Span, LiveBytes int64
	// Rebased files, and their bytes re-recorded.
	Files int
	Bytes int64
}

// Compact keeps the span of the log that recovery needs close to the live
// state: if the span from the first segment of any live file to the log's
// head exceeds c.Ratio times the live bytes, it re-records at the head the
// live files whose first segments are oldest, reading their content from the
// recorder's directory (see Rebase), until the span needed is about the live
// bytes. Fragments before the new span become prunable once hints taken
// after the compaction are stored (and older generations are dropped).
//
// Compact runs beside the store's other writes, which wait only while a file
// is re-recorded.
func (r *Recorder) Compact(ctx context.Context, c Compaction) (CompactResult, error) {
	type candidate struct {
		fn    Fnode
		first int64
	}
	var res CompactResult
	var cands []candidate

	r.mu.Lock()
	var head = r.offset
	var from = head
	for fn, n := range r.fsm.nodes {
		res.LiveBytes += n.size
		from = min(from, n.segments[0].FirstOffset)
		cands = append(cands, candidate{fn, n.segments[0].FirstOffset})
	}
	r.mu.Unlock()

	res.Span = head - from
	if c.Ratio <= 0 || res.Span < c.MinSpan || float64(res.Span) <= c.Ratio*float64(res.LiveBytes) {
		return res, nil
	}
	// Re-record the files which begin before the last LiveBytes of the log.
	var cut = head - res.LiveBytes
	slices.SortFunc(cands, func(a, b candidate) int { return int(min(max(a.first-b.first, -1), 1)) })
	for _, cand := range cands {
		if cand.first >= cut {
			break
		} else if err := ctx.Err(); err != nil {
			return res, err
		}
		var n, err = r.Rebase(cand.fn)
		if err != nil {
			return res, err
		} else if n >= 0 {
			res.Files++
			res.Bytes += n
		}
	}
	return res, nil
}

// Rebase re-records live file fn at the head of the log: a Rebase op, then
// its whole content, read from the recorder's directory. Once recorded, the
// file's earlier ops are no longer needed to rebuild it. Other ops wait
// until it's done. It returns the bytes re-recorded, or -1 if fn is no
// longer live (or its local file is being removed).
//
// The local file must hold what was recorded of it, as files written
// through the recorder do: their content is written before it's recorded.
func (r *Recorder) Rebase(fn Fnode) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return 0, r.err
	}
	var n, ok = r.fsm.nodes[fn]
	if !ok {
		return -1, nil
	}
	var links = slices.Sorted(slices.Values(n.links))
	var size = n.size
	var f, err = os.Open(filepath.Join(r.dir, filepath.FromSlash(links[0])))
	if errors.Is(err, fs.ErrNotExist) {
		return -1, nil // Deleted locally, and its Unlink waits for us.
	} else if err != nil {
		return 0, fmt.Errorf("rebasing %s of %s: %w", links[0], r.journal, err)
	}
	defer f.Close()

	if err = r.record(&Op{Kind: &Op_Rebase{Rebase: &Rebase{Fnode: uint64(fn), Links: links, Size: size}}}, nil); err != nil {
		return 0, err
	}
	var buf = make([]byte, min(size, MaxWriteLen))
	for offset := int64(0); offset < size; {
		var chunk = buf[:min(int64(len(buf)), size-offset)]
		if _, err = io.ReadFull(io.NewSectionReader(f, offset, int64(len(chunk))), chunk); err != nil {
			// The log holds an unfinished Rebase, which changes nothing.
			return 0, fmt.Errorf("rebasing %s of %s: reading %d bytes at %d of %d: %w",
				links[0], r.journal, len(chunk), offset, size, err)
		}
		if err = r.recordWrites(fn, chunk, offset); err != nil {
			return 0, err
		}
		offset += int64(len(chunk))
	}
	rebasedBytes.Add(float64(size))
	return size, nil
}
