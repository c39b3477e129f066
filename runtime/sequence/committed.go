package sequence

import (
	"errors"
	"fmt"
	"io"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/message"
)

// Committed is a message.Iterator over the committed messages of journals,
// acknowledgements included, in the order a Sequencer dequeues them: the
// read-committed view of what a reader of them reads uncommitted.
type Committed struct {
	// Sequencer orders what Uncommitted reads.
	Sequencer *Sequencer
	// Uncommitted reads the envelopes of the journals, read-uncommitted;
	// its io.EOF ends the iteration.
	Uncommitted message.Iterator
	// Replay returns an iterator over the read-uncommitted envelopes of
	// journal in [begin, end): the start of an acknowledged sequence that
	// the Sequencer's ring no longer holds.
	Replay func(journal pb.Journal, begin, end pb.Offset) (message.Iterator, error)
}

// ReadCommitted returns the Committed messages of the journal rr reads, which
// newMsg decodes, sequenced in a ring of ringSize messages; its replays read
// the journal again with new RetryReaders of rr's context and client.
func ReadCommitted(rr *client.RetryReader, newMsg message.NewMessageFunc, ringSize int) *Committed {
	return &Committed{
		Sequencer:   New(nil, nil, ringSize),
		Uncommitted: message.NewReadUncommittedIter(rr, newMsg),
		Replay: func(journal pb.Journal, begin, end pb.Offset) (message.Iterator, error) {
			var req = rr.Reader.Request
			req.Journal, req.Offset, req.EndOffset = journal, begin, end
			return message.NewReadUncommittedIter(client.NewRetryReader(rr.Context, rr.Client, req), newMsg), nil
		},
	}
}

// Next returns the next committed envelope, or io.EOF once Uncommitted
// returned it and no committed message remains.
func (c *Committed) Next() (message.Envelope, error) {
	for {
		if err := c.Sequencer.Step(); err == nil {
			return *c.Sequencer.Dequeued, nil
		} else if !errors.Is(err, io.EOF) {
			return message.Envelope{}, err
		}

		var env, err = c.Uncommitted.Next()
		if errors.Is(err, io.EOF) {
			return message.Envelope{}, io.EOF
		} else if err != nil {
			return message.Envelope{}, fmt.Errorf("sequence: reading uncommitted: %w", err)
		}
		if c.Sequencer.QueueUncommitted(env) != message.QueueAckCommitReplay {
			continue
		}
		var journal, begin, end = c.Sequencer.ReplayRange()
		var replay message.Iterator
		if replay, err = c.Replay(journal, begin, end); err != nil {
			return message.Envelope{}, fmt.Errorf("sequence: replaying %s [%d, %d): %w", journal, begin, end, err)
		}
		c.Sequencer.StartReplay(replay)
	}
}
