package recoverylog

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
)

// AuthorRegister is the journal register naming the one recorder allowed to
// append to a recovery log. Every append of a Recorder checks it, so the
// broker rejects the appends of a deposed recorder with REGISTER_MISMATCH.
const AuthorRegister = "gazconsumer.dev/recoverylog-author"

// String formats the author as the value of AuthorRegister.
func (a Author) String() string { return fmt.Sprintf("%08x", uint32(a)) }

// checkAuthor is the register selector of appends by author a.
func checkAuthor(a Author) *pb.LabelSelector {
	return &pb.LabelSelector{Include: pb.MustLabelSet(AuthorRegister, a.String())}
}

// appendFence appends frame (a Fence op of author) to journal, while setting
// the journal's AuthorRegister to author. It compares-and-swaps the register:
// should another fence land between reading the register and fencing, it
// reads the register again and retries.
func appendFence(ctx context.Context, jc pb.RoutedJournalClient, journal pb.Journal, author Author, frame []byte) (pb.AppendResponse, error) {
	for {
		// An empty append changes nothing, and tells the registers.
		var resp, err = client.Append(ctx, jc, pb.AppendRequest{Journal: journal})
		if err != nil {
			return resp, fmt.Errorf("reading registers of %s: %w", journal, err)
		}
		var req = pb.AppendRequest{
			Journal:           journal,
			UnionRegisters:    &pb.LabelSet{Labels: []pb.Label{{Name: AuthorRegister, Value: author.String()}}},
			CheckRegisters:    &pb.LabelSelector{Exclude: pb.MustLabelSet(AuthorRegister, "")},
			SubtractRegisters: nil,
		}
		if resp.Registers != nil {
			if prev := resp.Registers.ValuesOf(AuthorRegister); len(prev) != 0 {
				var sub pb.LabelSet
				for _, v := range prev {
					sub.AddValue(AuthorRegister, v)
				}
				req.CheckRegisters = &pb.LabelSelector{Include: sub}
				if len(prev) != 1 {
					// Include matches any one of several values; a single-valued
					// register is the invariant, so restore it.
					req.CheckRegisters = nil
				}
				req.SubtractRegisters = &sub
			}
		}
		resp, err = client.Append(ctx, jc, req, bytes.NewReader(frame))
		if errors.Is(err, client.ErrRegisterMismatch) {
			continue // Another fence won the race; read registers again.
		} else if err != nil {
			return resp, fmt.Errorf("fencing %s for author %s: %w", journal, author, err)
		}
		return resp, nil
	}
}
