// Package source reads the messages of a shard's source journals: it
// decodes them in their journals' framing (checking each protobuf frame's
// header itself, so that undecodable content is a span of the journal with
// its offsets, not the end of reading), and holds the policy by which a
// shard fails on an undecodable message or skips it into a dead-letter
// journal (the shard labels LabelOnDecodeError and LabelDeadLetterJournal),
// and the records of skipped messages.
package source

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/codec"
	"github.com/gazconsumer/gazconsumer/runtime/sequence"
	"github.com/gazconsumer/gazconsumer/runtime/txn"
	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Shard labels choosing what a shard does with a source message that fails
// to decode.
const (
	// LabelOnDecodeError is "fail" (the default: the shard fails, with a
	// status naming the journal and offset of the message) or "skip": the
	// shard skips the message, logs it, counts it in the metric
	// gazconsumer_shard_skipped_messages_total, and records it into the
	// journal named by LabelDeadLetterJournal, within the transaction that
	// skips it, so that each skipped message is recorded exactly once.
	LabelOnDecodeError = "gazconsumer.dev/on-decode-error"
	// LabelDeadLetterJournal names the journal into which a shard skipping
	// undecodable messages records them, as Skipped messages in JSON (the
	// journal's content-type must be application/x-ndjson). ListSkipped
	// reads them back.
	LabelDeadLetterJournal = "gazconsumer.dev/dead-letter-journal"
)

// Policy is what a shard does with an undecodable message.
type Policy struct {
	// Skip undecodable messages, rather than fail the shard.
	Skip bool
	// DeadLetters records the messages skipped: set if Skip.
	DeadLetters pb.Journal
}

// PolicyOf returns the decode policy the labels of spec choose.
func PolicyOf(spec *pc.ShardSpec) (Policy, error) {
	var p Policy
	switch v := spec.LabelSet.ValueOf(LabelOnDecodeError); v {
	case "", "fail":
	case "skip":
		p.Skip = true
	default:
		return p, fmt.Errorf("shard %s: label %s is %q, not \"fail\" or \"skip\"", spec.Id, LabelOnDecodeError, v)
	}
	var dl = pb.Journal(spec.LabelSet.ValueOf(LabelDeadLetterJournal))
	if p.Skip && dl == "" {
		return p, fmt.Errorf("shard %s: label %s=skip needs label %s, naming where skipped messages are recorded",
			spec.Id, LabelOnDecodeError, LabelDeadLetterJournal)
	} else if dl != "" {
		if err := dl.Validate(); err != nil {
			return p, fmt.Errorf("shard %s: label %s: %w", spec.Id, LabelDeadLetterJournal, err)
		}
	}
	p.DeadLetters = dl
	return p, nil
}

// DecodeError is a source message that could not be decoded.
type DecodeError struct {
	Journal pb.Journal
	// Begin and End are the offsets of the message's content. Where a
	// framing could not tell where the message ends (a protobuf frame whose
	// header is garbled, a malformed CSV record), End is Begin and the
	// checkpoint moves past it with the next message read.
	Begin, End pb.Offset
	// Content of the message as framed, if known.
	Content []byte
	Err     error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("journal %s offset %d: undecodable message: %v", e.Journal, e.Begin, e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Skipped records a message that a shard skipped for failing to decode, or
// whose handler failed under a failure policy that records dead letters
// (runtime.FailurePolicy). It is a message in its own right, published into
// the shard's dead-letter journal in JSON.
type Skipped struct {
	UUID    message.UUID `json:"uuid"`
	Shard   pc.ShardID   `json:"shard"`
	Journal pb.Journal   `json:"journal"`
	Begin   pb.Offset    `json:"begin"`
	End     pb.Offset    `json:"end"`
	Error   string       `json:"error"`
	// Content of the message as framed (base64 in JSON), if known.
	Content []byte `json:"content,omitempty"`
	// Handler is the rpc whose handler failed on the message, and Attempts
	// how many times it was called; both zero for an undecodable message.
	Handler  string `json:"handler,omitempty"`
	Attempts int    `json:"attempts,omitempty"`
	// Message is the message whose handler failed, in protobuf JSON.
	Message json.RawMessage `json:"message,omitempty"`
}

// HandlerFailed reports whether cause, an error handed to a Skipper, is
// that of a handler which failed under a failure policy recording dead
// letters, rather than of an undecodable message: it is recorded whatever
// the shard's LabelOnDecodeError.
func HandlerFailed(cause error) bool {
	var he *runtime.HandlerError
	return errors.As(cause, &he)
}

// GetUUID returns the record's UUID.
func (s *Skipped) GetUUID() message.UUID { return s.UUID }

// SetUUID sets the record's UUID.
func (s *Skipped) SetUUID(u message.UUID) { s.UUID = u }

// NewAcknowledgement returns an empty record to carry an acknowledgement.
func (s *Skipped) NewAcknowledgement(pb.Journal) message.Message { return new(Skipped) }

// ListSkipped reads the Skipped records of a dead-letter journal through
// its current write head, read-committed: each skipped message once.
func ListSkipped(ctx context.Context, jc pb.RoutedJournalClient, journal pb.Journal) ([]Skipped, error) {
	var head, err = client.Append(ctx, jc, pb.AppendRequest{Journal: journal})
	if err != nil {
		return nil, fmt.Errorf("write head of %s: %w", journal, err)
	}
	var rr = client.NewRetryReader(ctx, jc, pb.ReadRequest{Journal: journal, EndOffset: head.Commit.End})
	var it = sequence.ReadCommitted(rr, func(*pb.JournalSpec) (message.Message, error) { return new(Skipped), nil }, 1024)
	var out []Skipped
	for {
		var env, err = it.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading %s (offset %d): %w", journal, rr.Offset(), err)
		}
		if message.GetFlags(env.Message.GetUUID()) != message.Flag_ACK_TXN {
			out = append(out, *env.Message.(*Skipped))
		}
	}
}

// Skipper returns the txn.Pipeline's Skip of shard id under policy p: it
// records the message skipped, or the message whose handler failed, into
// p.DeadLetters, within the transaction. It fails with the cause if p has no
// DeadLetters.
func (p Policy) Skipper(id pc.ShardID) func(message.Envelope, error, *message.Publisher) error {
	var toDeadLetters = func(message.Mappable) (pb.Journal, string, error) {
		return p.DeadLetters, labels.ContentType_JSONLines, nil
	}
	return func(env message.Envelope, cause error, pub *message.Publisher) error {
		if p.DeadLetters == "" {
			return fmt.Errorf("shard %s has no label %s naming where dead letters are recorded", id, LabelDeadLetterJournal)
		}
		var rec, what, err = record(id, env, cause)
		if err != nil {
			return err
		}
		slog.Warn(what, "shard", id, "journal", rec.Journal, "offset", rec.Begin, "end", rec.End,
			"handler", rec.Handler, "attempts", rec.Attempts, "err", rec.Error, "recordedInto", p.DeadLetters)
		if _, err := pub.PublishUncommitted(toDeadLetters, rec); err != nil {
			return fmt.Errorf("recording into %s: %w", p.DeadLetters, err)
		}
		return nil
	}
}

// Skip is the txn.Pipeline's Skip of a shard whose spec is now spec: it
// records an undecodable message, if the spec's labels say to skip them,
// or a message whose handler failed under a failure policy recording dead
// letters, into the dead-letter journal the spec names, within the
// transaction. Otherwise, it returns cause, which fails the shard.
func Skip(spec *pc.ShardSpec, env message.Envelope, cause error, pub *message.Publisher) error {
	var policy, err = PolicyOf(spec)
	if err != nil {
		return err
	} else if !policy.Skip && !HandlerFailed(cause) {
		return cause
	}
	return policy.Skipper(spec.Id)(env, cause, pub)
}

// record returns the record of env, skipped for cause, and what is done
// with it, for the log.
func record(id pc.ShardID, env message.Envelope, cause error) (*Skipped, string, error) {
	var rec = &Skipped{Shard: id, Journal: env.Journal.Name, Begin: env.Begin, End: env.End, Error: cause.Error()}
	var de *DecodeError
	var he *runtime.HandlerError
	if errors.As(cause, &de) {
		rec.Error, rec.Content = de.Err.Error(), de.Content
		return rec, "skipping an undecodable message", nil
	} else if !errors.As(cause, &he) {
		return rec, "skipping an undecodable message", nil
	}
	rec.Error, rec.Handler, rec.Attempts = he.Err.Error(), he.Method, he.Attempts
	if pm, ok := env.Message.(proto.Message); ok {
		var b, err = protojson.Marshal(pm)
		var compact bytes.Buffer // protojson varies its spaces.
		if err == nil {
			err = json.Compact(&compact, b)
		}
		if err != nil {
			return nil, "", fmt.Errorf("encoding the dead letter of journal %s offset %d: %w", rec.Journal, rec.Begin, err)
		}
		rec.Message = compact.Bytes()
	}
	return rec, "recording a message whose handler failed as a dead letter", nil
}

// DefaultMaxMessageSize is the largest protobuf frame a shard reads, unless
// its LabelMaxMessageSize says otherwise.
const DefaultMaxMessageSize = 256 << 10

// LabelMaxMessageSize is the shard label setting the largest protobuf frame,
// in bytes, that the shard reads as a message. A frame header claiming more
// is undecodable content: a garbled header would otherwise have the shard
// wait for, and swallow, the messages appended after it.
const LabelMaxMessageSize = "gazconsumer.dev/max-message-bytes"

// MaxMessageSizeOf returns the largest frame that spec's labels accept.
func MaxMessageSizeOf(spec *pc.ShardSpec) (int, error) {
	var v = spec.LabelSet.ValueOf(LabelMaxMessageSize)
	if v == "" {
		return DefaultMaxMessageSize, nil
	}
	var n, err = strconv.ParseUint(v, 10, 31)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("shard %s: label %s is %q, not a number of bytes in [1, %d]", spec.Id, LabelMaxMessageSize, v, math.MaxInt32)
	}
	return int(n), nil
}

// Iter reads the envelopes of a journal, read-uncommitted, and tells
// messages that fail to decode from errors that end reading. It reads as
// Gazette's message.ReadUncommittedIter does, but itself checks the header
// of each protobuf frame: content that is not a frame, or a frame larger
// than maxSize, is an undecodable span of the journal, with its offsets and
// bytes, and reading resumes at the next frame header.
type Iter struct {
	rr      *client.RetryReader
	br      *bufio.Reader
	newMsg  message.NewMessageFunc
	resolve func(*pb.JournalSpec) (func() message.Message, error) // Of the application, if it has one.
	maxSize int

	spec      *pb.JournalSpec // Fetched on the first read.
	fixed     bool            // The journal's framing is protobuf fixed frames.
	unmarshal message.UnmarshalFunc
	construct func() message.Message // Of the journal's messages, if the application resolves it once.

	end pb.Offset // Of the last envelope read.
	// wrap is the lenient wrapper of the message being read, reused: Read
	// unwraps each envelope's message before returning it.
	wrap lenient
}

// NewIter returns an iterator of rr's journal, reading from rr's offset,
// whose messages newMsg makes; a protobuf frame larger than maxSize is
// undecodable.
func NewIter(rr *client.RetryReader, newMsg message.NewMessageFunc, maxSize int) *Iter {
	return &Iter{rr: rr, br: bufio.NewReader(rr), newMsg: newMsg, maxSize: maxSize, end: rr.Offset()}
}

// NewAppIter returns an iterator of rr's journal, whose messages app
// makes: through the constructor it resolves once for the journal, if it
// is a runtime.MessageConstructor.
func NewAppIter(rr *client.RetryReader, app runtime.Application, maxSize int) *Iter {
	var s = NewIter(rr, app.NewMessage, maxSize)
	if mc, ok := app.(runtime.MessageConstructor); ok {
		s.resolve = mc.MessageConstructor
	}
	return s
}

// init fetches the journal's spec and chooses its framing.
func (s *Iter) init() error {
	var spec, err = client.GetJournal(s.rr.Context, s.rr.Client, s.rr.Journal())
	if err != nil {
		return fmt.Errorf("fetching the spec of journal %s: %w", s.rr.Journal(), err)
	}
	var ct = spec.LabelSet.ValueOf(labels.ContentType)
	framing, err := message.FramingByContentType(ct)
	if err != nil {
		return fmt.Errorf("journal %s: %w", spec.Name, err)
	}
	spec.Name = s.rr.Journal() // With any metadata path segment, as Gazette's iterators.
	s.spec, s.fixed, s.unmarshal = spec, ct == labels.ContentType_ProtoFixed, framing.NewUnmarshalFunc(s.br)
	if s.resolve != nil {
		if s.construct, err = s.resolve(spec); err != nil {
			return err // Naming the journal.
		}
	}
	return nil
}

// Read returns the next envelope. If its message failed to decode, the
// envelope's Message is nil and undecodable tells why.
func (s *Iter) Read() (env message.Envelope, undecodable *DecodeError, err error) {
	if s.spec == nil {
		if err = s.init(); err != nil {
			return env, nil, err
		}
	}
	for {
		var begin = s.rr.AdjustedOffset(s.br)
		if s.fixed {
			if content, cause := s.badFrame(begin); cause != nil {
				s.end = s.rr.AdjustedOffset(s.br)
				return message.Envelope{Journal: s.spec, Begin: begin, End: s.end},
					&DecodeError{Journal: s.spec.Name, Begin: begin, End: s.end, Content: content, Err: cause}, nil
			}
		}
		var m message.Message
		if s.construct != nil {
			m = s.construct()
		} else if m, err = s.newMsg(s.spec); err != nil {
			return env, nil, fmt.Errorf("journal %s offset %d: %w", s.spec.Name, begin, err)
		}
		s.wrap = lenient{Message: m, fresh: s.construct != nil}
		err = s.unmarshal(&s.wrap)
		switch {
		case err == nil:
			s.end = s.rr.AdjustedOffset(s.br)
			env = message.Envelope{Journal: s.spec, Begin: begin, End: s.end}
			if s.wrap.err == nil {
				env.Message = s.wrap.Message
				return env, nil, nil
			}
			return env, &DecodeError{Journal: s.spec.Name, Begin: begin, End: s.end, Content: s.wrap.content, Err: s.wrap.err}, nil
		case errors.Is(err, io.EOF):
			return env, nil, err
		case errors.Is(err, io.ErrNoProgress):
			// An empty read of the retrying reader, surfaced by the
			// bufio.Reader: nothing is wrong (as Gazette's iterator).
			continue
		case errors.Is(err, client.ErrOffsetJump):
			// Content was removed from the journal: reading goes on at the
			// next offset there is.
			slog.Warn("source journal offset jump", "journal", s.spec.Name, "from", begin, "to", s.rr.Offset())
			continue
		case isParseError(err) || errors.Is(err, message.ErrDesyncDetected):
			// The framing could not tell the message's end; reading goes
			// on from the next message it finds.
			s.end = s.rr.AdjustedOffset(s.br)
			return message.Envelope{Journal: s.spec, Begin: begin, End: s.end},
				&DecodeError{Journal: s.spec.Name, Begin: begin, End: s.end, Err: err}, nil
		default:
			return env, nil, fmt.Errorf("framing at offset %d: %w", begin, err)
		}
	}
}

// isParseError reports whether err is a CSV framing's *csv.ParseError. Its
// target lives here, not in Read, where errors.As would move it to the heap
// on every message read.
func isParseError(err error) bool {
	var parseErr *csv.ParseError
	return errors.As(err, &parseErr)
}

// badFrame checks the protobuf frame header at offset begin. If the content
// there is not a frame header, or the header claims more than maxSize
// bytes, it discards the content up to the next frame header it finds among
// the buffered bytes (all of them but a last few that may begin a header)
// and returns it with the reason. A header not yet fully read is left to the
// framing, which waits for it or reports the reader's error.
func (s *Iter) badFrame(begin pb.Offset) ([]byte, error) {
	var b, err = s.br.Peek(message.FixedFrameHeaderLength)
	if err != nil {
		return nil, nil
	}
	var cause error
	if !bytes.Equal(b[:4], message.FixedFrameWord[:]) {
		cause = fmt.Errorf("no frame header: %w", message.ErrDesyncDetected)
	} else if size := binary.LittleEndian.Uint32(b[4:]); uint64(size) > uint64(s.maxSize) {
		cause = fmt.Errorf("frame header claims %d bytes, more than the largest message read (%d bytes; shard label %s)",
			size, s.maxSize, LabelMaxMessageSize)
	} else {
		return nil, nil
	}
	b, _ = s.br.Peek(s.br.Buffered())
	var n = len(b)
	if i := bytes.Index(b[1:], message.FixedFrameWord[:]); i >= 0 {
		n = 1 + i
	} else {
		// Keep a last few bytes that may begin the next header.
		for k := len(message.FixedFrameWord) - 1; k > 0; k-- {
			if bytes.HasSuffix(b, message.FixedFrameWord[:k]) {
				n = len(b) - k
				break
			}
		}
	}
	var content = append([]byte(nil), b[:n]...)
	_, _ = s.br.Discard(n)
	return content, cause
}

// Next implements message.Iterator for the Sequencer's replays, passing
// over undecodable messages: the reads of the shard handled them when they
// were first read.
func (s *Iter) Next() (message.Envelope, error) {
	for {
		var env, undecodable, err = s.Read()
		if undecodable == nil {
			return env, err
		}
	}
}

// ToRead converts what Read returned into the txn.Read of a shard under
// policy p.
func (p Policy) ToRead(env message.Envelope, undecodable *DecodeError, err error) txn.Read {
	switch {
	case err != nil:
		return txn.Read{Err: err}
	case undecodable != nil && p.Skip:
		return txn.Read{Env: env, Skip: undecodable}
	case undecodable != nil:
		return txn.Read{Err: undecodable}
	default:
		return txn.Read{Env: env}
	}
}

// lenient wraps a message so that a failure to decode it is kept, rather
// than failing the framing's read: the reader then goes on past it. It
// offers each framing's decoding interface, and delegates to the message.
type lenient struct {
	message.Message
	content []byte
	err     error
	// fresh tells that Message is a new protobuf message of a
	// runtime.MessageConstructor, which decodes as codec.Unmarshal does:
	// it's decoded without a reset first (codec.UnmarshalNew).
	fresh bool
}

func (l *lenient) fail(content []byte, err error) {
	l.content, l.err = append([]byte(nil), content...), err
}

// Unmarshal decodes a protobuf frame (message.ProtoFrameable).
func (l *lenient) Unmarshal(b []byte) error {
	if pm, ok := l.Message.(proto.Message); ok && l.fresh {
		if err := codec.UnmarshalNew(b, pm); err != nil {
			l.fail(b, err)
		}
		return nil
	}
	var pf, ok = l.Message.(message.ProtoFrameable)
	if !ok {
		return fmt.Errorf("%T is not a message.ProtoFrameable", l.Message)
	}
	if err := pf.Unmarshal(b); err != nil {
		l.fail(b, err)
	}
	return nil
}

// ProtoSize is the message's, if it's a message.ProtoFrameable.
func (l *lenient) ProtoSize() int {
	if pf, ok := l.Message.(message.ProtoFrameable); ok {
		return pf.ProtoSize()
	}
	return 0
}

// MarshalTo is the message's, if it's a message.ProtoFrameable.
func (l *lenient) MarshalTo(b []byte) (int, error) {
	if pf, ok := l.Message.(message.ProtoFrameable); ok {
		return pf.MarshalTo(b)
	}
	return 0, fmt.Errorf("%T is not a message.ProtoFrameable", l.Message)
}

// UnmarshalJSON decodes a JSON line.
func (l *lenient) UnmarshalJSON(b []byte) error {
	var err error
	if u, ok := l.Message.(json.Unmarshaler); ok {
		err = u.UnmarshalJSON(b)
	} else {
		err = json.Unmarshal(b, l.Message)
	}
	if err != nil {
		l.fail(b, err)
	}
	return nil
}

// UnmarshalCSV decodes a CSV record (message.CSVFrameable).
func (l *lenient) UnmarshalCSV(records []string) error {
	var cf, ok = l.Message.(message.CSVFrameable)
	if !ok {
		return fmt.Errorf("%T is not a message.CSVFrameable", l.Message)
	}
	if err := cf.UnmarshalCSV(records); err != nil {
		var b bytes.Buffer
		var w = csv.NewWriter(&b)
		_ = w.Write(records)
		w.Flush()
		l.fail(b.Bytes(), err)
	}
	return nil
}

// MarshalCSV is the message's, if it's a message.CSVFrameable.
func (l *lenient) MarshalCSV() ([]string, error) {
	if cf, ok := l.Message.(message.CSVFrameable); ok {
		return cf.MarshalCSV()
	}
	return nil, fmt.Errorf("%T is not a message.CSVFrameable", l.Message)
}

// WriteHead returns the write head of journal, as a read of its metadata
// tells it.
func WriteHead(ctx context.Context, jc pb.RoutedJournalClient, journal pb.Journal) (pb.Offset, error) {
	var ctx2, cancel = context.WithCancel(ctx)
	defer cancel()
	var stream, err = jc.Read(pb.WithDispatchDefault(ctx2), &pb.ReadRequest{Journal: journal, Offset: 0, MetadataOnly: true})
	if err != nil {
		return 0, fmt.Errorf("reading the write head of %s: %w", journal, err)
	}
	resp, err := stream.Recv()
	if err != nil {
		return 0, fmt.Errorf("reading the write head of %s: %w", journal, err)
	} else if resp.Status != pb.Status_OK && resp.Status != pb.Status_OFFSET_NOT_YET_AVAILABLE {
		return 0, fmt.Errorf("reading the write head of %s: %s", journal, resp.Status)
	}
	return resp.WriteHead, nil
}
