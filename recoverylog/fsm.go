package recoverylog

import (
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"path"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
)

// Author identifies a recorder, and is the author of every op it writes.
type Author uint32

// Fnode identifies a file node: it's the seq of the node's Create op.
type Fnode uint64

// ErrNotFollowing is returned by FSM.Apply for an op which does not continue
// the log's valid history: its seq or checksum don't follow the previous valid
// op, or its author isn't the history's current author. Such ops belong to a
// dead branch of a fork (a deposed or foreign writer), or are copies of ops
// already applied (an append which a broker committed again after its
// acknowledgement was lost), and are skipped.
var ErrNotFollowing = errors.New("op does not follow the log's valid history")

// segmentGap is the most bytes of other ops that may lie between two ops of
// a node in one segment: reading them costs less than another read request.
const segmentGap = 64 << 10

// maxNodeSegments bounds the segments of a node, keeping hints small: past
// it, the two segments with the least bytes between them are merged.
const maxNodeSegments = 32

type node struct {
	links    []string
	segments []*Segment
	size     int64
	rebase   *rebasing // Re-recording in progress, if any.
	// source is the node of another log which the node adopted, while its
	// first segment begins at its Adopt op.
	source *Source
}

// rebasing is a Rebase of a node whose writes haven't yet covered its size.
type rebasing struct {
	seq     uint64 // Of the Rebase op.
	covered int64  // Bytes from offset zero re-recorded so far.
	size    int64
}

// FSM is the state machine of a recovery log's valid history. It checks that
// each op follows the one before, and tracks the live file nodes, their
// names, the segments of the log holding their ops, and the properties.
// An FSM is not safe for concurrent use.
type FSM struct {
	nextSeq      uint64
	nextChecksum uint32
	nextOffset   int64
	author       Author

	nodes map[Fnode]*node
	links map[string]Fnode
	props map[string][]byte
	// hinted is non-nil while replaying the segments of Hints: only its nodes
	// are tracked, ops of others are skipped, and properties come from Hints.
	hinted map[Fnode]*LiveNode
}

// NewFSM returns the FSM of an empty log, whose first op has seq 1.
func NewFSM() *FSM {
	return &FSM{
		nextSeq: 1,
		nodes:   make(map[Fnode]*node),
		links:   make(map[string]Fnode),
		props:   make(map[string][]byte),
	}
}

// NextSeq is the seq which the next valid op must carry.
func (f *FSM) NextSeq() uint64 { return f.nextSeq }

// NextChecksum is the checksum which the next valid op must carry.
func (f *FSM) NextChecksum() uint32 { return f.nextChecksum }

// NextOffset is the log offset just past the last applied op.
func (f *FSM) NextOffset() int64 { return f.nextOffset }

// Author of the last valid op.
func (f *FSM) Author() Author { return f.author }

// Lookup returns the live node linked at name.
func (f *FSM) Lookup(name string) (Fnode, bool) {
	var fn, ok = f.links[name]
	return fn, ok
}

// Size of live node fn: the greatest end of its writes.
func (f *FSM) Size(fn Fnode) (int64, bool) {
	if n, ok := f.nodes[fn]; ok {
		return n.size, true
	}
	return 0, false
}

// Links returns the names of live node fn, sorted.
func (f *FSM) Links(fn Fnode) []string {
	if n, ok := f.nodes[fn]; ok {
		return slices.Sorted(slices.Values(n.links))
	}
	return nil
}

// Property returns the content of property name.
func (f *FSM) Property(name string) ([]byte, bool) {
	var b, ok = f.props[name]
	return b, ok
}

// validPath reports whether p is a clean, relative, slash-separated path
// that stays within the store's directory.
func validPath(p string) bool {
	return p != "" && p != "." && path.Clean(p) == p && !path.IsAbs(p) &&
		p != ".." && !strings.HasPrefix(p, "../") && !strings.ContainsRune(p, 0)
}

// Apply applies op, encoded as opBytes, which the log holds at
// [begin, end). It returns ErrNotFollowing, with the FSM unchanged, if the op
// is not the next of the valid history. It returns whether the op has an
// effect to play: false for an op of a node that replayed Hints leave out.
// Any other error means the history is invalid, and leaves the FSM unchanged.
func (f *FSM) Apply(op *Op, opBytes []byte, begin, end int64) (bool, error) {
	if op.Seq != f.nextSeq || op.Checksum != f.nextChecksum {
		return false, ErrNotFollowing
	}
	if Author(op.Author) != f.author && op.GetFence() == nil {
		return false, ErrNotFollowing
	}
	if op.Author == 0 {
		return false, fmt.Errorf("op %d has no author", op.Seq)
	}
	var effect, err = f.apply(op, begin, end)
	if err != nil {
		return false, fmt.Errorf("op %d: %w", op.Seq, err)
	}
	f.nextSeq++
	f.nextChecksum = crc32.Update(f.nextChecksum, castagnoli, opBytes)
	f.nextOffset = end
	f.author = Author(op.Author)
	return effect, nil
}

// apply validates op and, if valid, applies its effect.
func (f *FSM) apply(op *Op, begin, end int64) (bool, error) {
	var touch = func(fn Fnode) {
		var n = f.nodes[fn]
		if l := len(n.segments); l != 0 && op.GetRebase() == nil {
			var s = n.segments[l-1]
			if s.Author == op.Author && begin-s.EndOffset <= segmentGap {
				s.LastSeq, s.EndOffset = op.Seq, end
				return
			}
		}
		if len(n.segments) >= maxNodeSegments {
			n.segments = mergeClosest(n.segments)
		}
		n.segments = append(n.segments, &Segment{
			Author:        op.Author,
			FirstSeq:      op.Seq,
			FirstChecksum: op.Checksum,
			FirstOffset:   begin,
			LastSeq:       op.Seq,
			EndOffset:     end,
		})
	}
	// live returns the node fn, or whether its op is skipped during replay of hints.
	var live = func(fn Fnode) (*node, bool, error) {
		if f.skipHinted(fn, op.Seq) {
			return nil, true, nil
		} else if n, ok := f.nodes[fn]; ok {
			return n, false, nil
		}
		return nil, false, fmt.Errorf("node %d is not live", fn)
	}

	switch k := op.Kind.(type) {
	case *Op_Create:
		var fn = Fnode(op.Seq)
		if f.skipHinted(fn, op.Seq) {
			return false, nil
		} else if !validPath(k.Create.Path) {
			return false, fmt.Errorf("create of invalid path %q", k.Create.Path)
		} else if other, ok := f.links[k.Create.Path]; ok {
			return false, fmt.Errorf("create of %q, which links node %d", k.Create.Path, other)
		} else if _, ok := f.props[k.Create.Path]; ok && f.hinted == nil {
			return false, fmt.Errorf("create of %q, which is a property", k.Create.Path)
		}
		f.nodes[fn] = &node{links: []string{k.Create.Path}}
		f.links[k.Create.Path] = fn
		touch(fn)
		return true, nil

	case *Op_Write:
		var n, skip, err = live(Fnode(k.Write.Fnode))
		if skip || err != nil {
			return false, err
		} else if k.Write.Offset < 0 || k.Write.Length < 0 || k.Write.Length > MaxWriteLen {
			return false, fmt.Errorf("write of %d bytes at %d", k.Write.Length, k.Write.Offset)
		}
		n.size = max(n.size, k.Write.Offset+k.Write.Length)
		touch(Fnode(k.Write.Fnode))
		if r := n.rebase; r != nil && k.Write.Offset == r.covered {
			r.covered += k.Write.Length
			n.rebased()
		} else if r != nil {
			n.rebase = nil // Not a re-recording: the node's earlier ops stay needed.
		}
		return true, nil

	case *Op_Rebase:
		var fn = Fnode(k.Rebase.Fnode)
		var n, skip, err = live(fn)
		if skip {
			return false, nil
		} else if k.Rebase.Size < 0 || len(k.Rebase.Links) == 0 {
			return false, fmt.Errorf("rebase of node %d with %d links and size %d", fn, len(k.Rebase.Links), k.Rebase.Size)
		}
		var links = slices.Sorted(slices.Values(k.Rebase.Links))
		if err != nil && f.hinted != nil && f.hinted[fn].Segments[0].FirstSeq == op.Seq {
			// The hints begin the node here: create it.
			for _, l := range links {
				if !validPath(l) {
					return false, fmt.Errorf("rebase of node %d at invalid path %q", fn, l)
				} else if other, ok := f.links[l]; ok {
					return false, fmt.Errorf("rebase of node %d at %q, which links node %d", fn, l, other)
				}
			}
			n = &node{links: links}
			f.nodes[fn] = n
			for _, l := range links {
				f.links[l] = fn
			}
		} else if err != nil {
			return false, err
		} else if got := slices.Sorted(slices.Values(n.links)); !slices.Equal(got, links) || n.size != k.Rebase.Size {
			return false, fmt.Errorf("rebase of node %d linked at %q with %d bytes, but it's linked at %q with %d bytes",
				fn, links, k.Rebase.Size, got, n.size)
		}
		n.size = max(n.size, k.Rebase.Size)
		n.rebase = &rebasing{seq: op.Seq, size: k.Rebase.Size}
		touch(fn)
		n.rebased()
		return true, nil

	case *Op_Adopt:
		var fn = Fnode(op.Seq)
		if f.skipHinted(fn, op.Seq) {
			return false, nil
		} else if err := validateSource(k.Adopt.Source); err != nil {
			return false, fmt.Errorf("adopt: %w", err)
		} else if len(k.Adopt.Links) == 0 {
			return false, fmt.Errorf("adopt of %s node %d without links", k.Adopt.Source.Log, k.Adopt.Source.Node.Fnode)
		}
		var links = slices.Sorted(slices.Values(k.Adopt.Links))
		for i, l := range links {
			if !validPath(l) || i != 0 && links[i-1] == l {
				return false, fmt.Errorf("adopt at invalid or repeated path %q", l)
			} else if other, ok := f.links[l]; ok {
				return false, fmt.Errorf("adopt at %q, which links node %d", l, other)
			} else if _, ok := f.props[l]; ok && f.hinted == nil {
				return false, fmt.Errorf("adopt at %q, which is a property", l)
			}
		}
		f.nodes[fn] = &node{links: links, size: k.Adopt.Source.Node.Size, source: proto.CloneOf(k.Adopt.Source)}
		for _, l := range links {
			f.links[l] = fn
		}
		touch(fn)
		return true, nil

	case *Op_Link:
		var n, skip, err = live(Fnode(k.Link.Fnode))
		if skip || err != nil {
			return false, err
		} else if !validPath(k.Link.Path) {
			return false, fmt.Errorf("link of invalid path %q", k.Link.Path)
		} else if other, ok := f.links[k.Link.Path]; ok {
			return false, fmt.Errorf("link of %q, which links node %d", k.Link.Path, other)
		} else if _, ok := f.props[k.Link.Path]; ok && f.hinted == nil {
			return false, fmt.Errorf("link of %q, which is a property", k.Link.Path)
		}
		n.links, n.rebase = append(n.links, k.Link.Path), nil
		f.links[k.Link.Path] = Fnode(k.Link.Fnode)
		touch(Fnode(k.Link.Fnode))
		return true, nil

	case *Op_Unlink:
		var fn = Fnode(k.Unlink.Fnode)
		var n, skip, err = live(fn)
		if skip || err != nil {
			return false, err
		} else if f.links[k.Unlink.Path] != fn {
			return false, fmt.Errorf("unlink of %q, which doesn't link node %d", k.Unlink.Path, fn)
		}
		delete(f.links, k.Unlink.Path)
		n.rebase = nil
		n.links = slices.DeleteFunc(n.links, func(l string) bool { return l == k.Unlink.Path })
		if len(n.links) == 0 {
			delete(f.nodes, fn) // Dead; its segments are no longer needed.
		} else {
			touch(fn)
		}
		return true, nil

	case *Op_Property:
		if f.hinted != nil {
			return false, nil // Hints hold the properties as of their end.
		} else if !validPath(k.Property.Path) {
			return false, fmt.Errorf("property of invalid path %q", k.Property.Path)
		} else if fn, ok := f.links[k.Property.Path]; ok {
			return false, fmt.Errorf("property %q, which links node %d", k.Property.Path, fn)
		}
		if k.Property.Remove {
			delete(f.props, k.Property.Path)
		} else {
			f.props[k.Property.Path] = slices.Clone(k.Property.Content)
		}
		return true, nil

	case *Op_Fence:
		return true, nil

	default:
		return false, fmt.Errorf("op of unknown kind")
	}
}

// rebased completes n's Rebase once its writes cover its size: the
// segments before the Rebase's are no longer needed.
func (n *node) rebased() {
	var r = n.rebase
	if r == nil || r.covered < r.size {
		return
	}
	n.rebase = nil
	for i, s := range n.segments {
		if s.FirstSeq == r.seq {
			n.segments = n.segments[i:]
			n.source = nil // Its content is re-recorded: the other log's no longer needed.
			return
		}
	}
	// The Rebase's segment was merged with an earlier one: keep them all.
}

// skipHinted reports whether, replaying hints, an op with seq of node fn is
// to be skipped: the node isn't live at the hints' end, or its hinted
// segments begin after the op (at a Rebase).
func (f *FSM) skipHinted(fn Fnode, seq uint64) bool {
	if f.hinted == nil {
		return false
	}
	var ln = f.hinted[fn]
	return ln == nil || seq < ln.Segments[0].FirstSeq
}

// Hints summarize the FSM's history for a player, which reads from log only
// the segments of live nodes, then the log from NextOffset on.
func (f *FSM) Hints(log string) *Hints {
	var h = &Hints{
		Log:          log,
		Properties:   maps.Clone(f.props),
		NextSeq:      f.nextSeq,
		NextChecksum: f.nextChecksum,
		NextOffset:   f.nextOffset,
		Author:       uint32(f.author),
	}
	for _, fn := range slices.Sorted(maps.Keys(f.nodes)) {
		var n = f.nodes[fn]
		var ln = &LiveNode{Fnode: uint64(fn), Links: slices.Sorted(slices.Values(n.links)), Size: n.size}
		if n.source != nil && n.segments[0].FirstSeq == uint64(fn) {
			ln.Source = proto.CloneOf(n.source)
		}
		for _, s := range n.segments {
			ln.Segments = append(ln.Segments, cloneSegment(s))
		}
		h.LiveNodes = append(h.LiveNodes, ln)
	}
	return h
}

// mergeClosest merges the two adjacent segments with the fewest bytes
// between them.
func mergeClosest(segs []*Segment) []*Segment {
	var best = 1
	for i := 2; i < len(segs); i++ {
		if segs[i].FirstOffset-segs[i-1].EndOffset < segs[best].FirstOffset-segs[best-1].EndOffset {
			best = i
		}
	}
	segs[best-1].LastSeq, segs[best-1].EndOffset = segs[best].LastSeq, segs[best].EndOffset
	return slices.Delete(segs, best, best+1)
}

// shiftOffsets moves the log offsets of ops framed at or after s.at by s.by
// bytes, as a Recorder does on learning that the log holds bytes there which
// it didn't expect: copies of its own append, whose ops players skip as they
// repeat seqs already played. A segment spanning s.at comes to span them.
func (f *FSM) shiftOffsets(s offsetShift) {
	for _, n := range f.nodes {
		for _, seg := range n.segments {
			shiftSegment(seg, s)
		}
	}
	f.nextOffset = s.begin(f.nextOffset)
}

// shiftHints moves the offsets of h as FSM.shiftOffsets does those of the
// FSM which h summarizes.
func shiftHints(h *Hints, s offsetShift) {
	for _, ln := range h.LiveNodes {
		for _, seg := range ln.Segments {
			shiftSegment(seg, s)
		}
	}
	h.NextOffset = s.begin(h.NextOffset)
}

func shiftSegment(seg *Segment, s offsetShift) {
	seg.FirstOffset, seg.EndOffset = s.begin(seg.FirstOffset), s.end(seg.EndOffset)
}

func cloneSegment(s *Segment) *Segment {
	return &Segment{
		Author:        s.Author,
		FirstSeq:      s.FirstSeq,
		FirstChecksum: s.FirstChecksum,
		FirstOffset:   s.FirstOffset,
		LastSeq:       s.LastSeq,
		EndOffset:     s.EndOffset,
	}
}

// validateHints checks that h is self-consistent.
func validateHints(h *Hints) error {
	if h.NextSeq == 0 || h.NextOffset < 0 {
		return fmt.Errorf("hints of %s: next seq %d at offset %d", h.Log, h.NextSeq, h.NextOffset)
	}
	var seen = make(map[string]bool)
	for _, ln := range h.LiveNodes {
		if len(ln.Links) == 0 || len(ln.Segments) == 0 {
			return fmt.Errorf("hints of %s: node %d has %d links and %d segments", h.Log, ln.Fnode, len(ln.Links), len(ln.Segments))
		}
		if ln.Segments[0].FirstSeq < ln.Fnode {
			return fmt.Errorf("hints of %s: node %d's first segment begins at seq %d", h.Log, ln.Fnode, ln.Segments[0].FirstSeq)
		}
		for _, s := range ln.Segments {
			if s.FirstSeq == 0 || s.LastSeq < s.FirstSeq || s.LastSeq >= h.NextSeq ||
				s.FirstOffset < 0 || s.EndOffset <= s.FirstOffset || s.EndOffset > h.NextOffset {
				return fmt.Errorf("hints of %s: node %d has invalid segment %v", h.Log, ln.Fnode, s)
			}
		}
		if ln.Source != nil {
			if ln.Segments[0].FirstSeq != ln.Fnode {
				return fmt.Errorf("hints of %s: node %d adopts a node of %s, but its first segment begins at seq %d", h.Log, ln.Fnode, ln.Source.Log, ln.Segments[0].FirstSeq)
			} else if err := validateSource(ln.Source); err != nil {
				return fmt.Errorf("hints of %s: node %d: %w", h.Log, ln.Fnode, err)
			}
		}
		for _, l := range ln.Links {
			if !validPath(l) || seen[l] {
				return fmt.Errorf("hints of %s: node %d has invalid or repeated link %q", h.Log, ln.Fnode, l)
			}
			seen[l] = true
		}
	}
	for p := range h.Properties {
		if !validPath(p) || seen[p] {
			return fmt.Errorf("hints of %s: invalid property %q", h.Log, p)
		}
	}
	return nil
}

// maxSourceDepth bounds the chain of logs an adopted node's content is read
// through (a node adopted from a node adopted from another...): one link per
// generation of splits.
const maxSourceDepth = 64

// validateSource checks that src names a node of another log with segments
// that hold its content, and so does its source, if any.
func validateSource(src *Source) error {
	for depth := 0; src != nil; depth++ {
		var ln = src.GetNode()
		switch {
		case depth == maxSourceDepth:
			return fmt.Errorf("node adopted through more than %d logs", maxSourceDepth)
		case src.Log == "" || ln == nil:
			return fmt.Errorf("adopted node without a log (%q) or node", src.Log)
		case ln.Size < 0 || len(ln.Segments) == 0 || len(ln.Links) == 0 || ln.Segments[0].FirstSeq < ln.Fnode:
			return fmt.Errorf("adopted node %d of %s has %d links, %d segments, and size %d", ln.Fnode, src.Log, len(ln.Links), len(ln.Segments), ln.Size)
		case ln.Source != nil && ln.Segments[0].FirstSeq != ln.Fnode:
			return fmt.Errorf("adopted node %d of %s adopts another, but its first segment begins at seq %d", ln.Fnode, src.Log, ln.Segments[0].FirstSeq)
		}
		for _, s := range ln.Segments {
			if s.FirstSeq == 0 || s.LastSeq < s.FirstSeq || s.FirstOffset < 0 || s.EndOffset <= s.FirstOffset {
				return fmt.Errorf("adopted node %d of %s has invalid segment %v", ln.Fnode, src.Log, s)
			}
		}
		for _, l := range ln.Links {
			if !validPath(l) {
				return fmt.Errorf("adopted node %d of %s has invalid link %q", ln.Fnode, src.Log, l)
			}
		}
		src = ln.Source
	}
	return nil
}

// beginHinted readies the FSM to replay the segments of h.
func (f *FSM) beginHinted(h *Hints) {
	f.hinted = make(map[Fnode]*LiveNode, len(h.LiveNodes))
	for _, ln := range h.LiveNodes {
		f.hinted[Fnode(ln.Fnode)] = ln
	}
}

// resetChain positions the FSM's history at seq, checksum and offset, to
// continue replay there.
func (f *FSM) resetChain(seq uint64, checksum uint32, offset int64, author Author) {
	f.nextSeq, f.nextChecksum, f.nextOffset, f.author = seq, checksum, offset, author
}

// endHinted checks that replay of h's segments rebuilt h's live nodes, and
// positions the FSM at the end of h.
func (f *FSM) endHinted(h *Hints) error {
	for fn, ln := range f.hinted {
		var n, ok = f.nodes[fn]
		if !ok {
			return fmt.Errorf("replay of hinted segments of %s did not create node %d", h.Log, fn)
		} else if got := slices.Sorted(slices.Values(n.links)); !slices.Equal(got, slices.Sorted(slices.Values(ln.Links))) {
			return fmt.Errorf("replay of hinted segments of %s linked node %d at %q, not %q", h.Log, fn, got, ln.Links)
		} else if n.size != ln.Size {
			return fmt.Errorf("replay of hinted segments of %s wrote %d bytes of node %d, not %d", h.Log, n.size, fn, ln.Size)
		}
	}
	if len(f.nodes) != len(f.hinted) {
		return fmt.Errorf("replay of hinted segments of %s left %d nodes, not %d", h.Log, len(f.nodes), len(f.hinted))
	}
	f.hinted = nil
	f.props = maps.Clone(h.Properties)
	if f.props == nil {
		f.props = make(map[string][]byte)
	}
	f.resetChain(h.NextSeq, h.NextChecksum, h.NextOffset, Author(h.Author))
	return nil
}
