package consumertest

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	pb "go.gazette.dev/core/broker/protocol"
	"go.gazette.dev/core/labels"
	"go.gazette.dev/core/message"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// journals are the journals of a Harness, in memory. They serve the Append
// RPC of Gazette's brokers, so that the runtime's appends (through a
// client.AppendService, as a shard's) reach them as they would the brokers,
// and are read directly.
type journals struct {
	mu      sync.Mutex
	byName  map[pb.Journal]*journal
	appends int64 // Appended so far, to all journals.
}

// journal is a journal held in memory.
type journal struct {
	spec    pb.JournalSpec
	content []byte // Only ever appended to: a slice of it never changes.
	appends []appended
}

// appended is an append to a journal: where it begins, and how many appends
// to all journals preceded it.
type appended struct {
	begin pb.Offset
	seq   int64
}

var _ pb.RoutedJournalClient = (*journals)(nil)

func newJournals() *journals { return &journals{byName: make(map[pb.Journal]*journal)} }

// create adds an empty journal of spec.
func (js *journals) create(spec pb.JournalSpec) {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.byName[spec.Name] = &journal{spec: spec}
}

// content returns the spec of journal name and its content so far.
func (js *journals) content(name pb.Journal) (*pb.JournalSpec, []byte) {
	js.mu.Lock()
	defer js.mu.Unlock()
	var j = js.byName[name]
	return &j.spec, j.content[:len(j.content):len(j.content)]
}

// append appends content to journal name, and returns the offsets it spans,
// or false if there is no such journal.
func (js *journals) append(name pb.Journal, content []byte) (begin, end pb.Offset, ok bool) {
	js.mu.Lock()
	defer js.mu.Unlock()
	var j = js.byName[name]
	if j == nil {
		return 0, 0, false
	}
	begin = pb.Offset(len(j.content))
	j.content = append(j.content, content...)
	j.appends = append(j.appends, appended{begin: begin, seq: js.appends})
	js.appends++
	return begin, pb.Offset(len(j.content)), true
}

// seqOf returns the sequence number of the append to journal name holding
// offset: appends to all journals are numbered in the order they happened.
func (js *journals) seqOf(name pb.Journal, offset pb.Offset) int64 {
	js.mu.Lock()
	defer js.mu.Unlock()
	var as = js.byName[name].appends
	var i, found = slices.BinarySearchFunc(as, offset, func(a appended, o pb.Offset) int { return cmp.Compare(a.begin, o) })
	if !found {
		i-- // Within the append before.
	}
	return as[max(i, 0)].seq
}

// list returns the journals among names whose labels sel matches, in name
// order.
func (js *journals) list(names []pb.Journal, sel pb.LabelSelector) *pb.ListResponse {
	js.mu.Lock()
	defer js.mu.Unlock()
	var resp = new(pb.ListResponse)
	for _, name := range names {
		if j := js.byName[name]; sel.Matches(j.spec.LabelSetExt(pb.LabelSet{})) {
			resp.Journals = append(resp.Journals, pb.ListResponse_Journal{Spec: j.spec})
		}
	}
	slices.SortFunc(resp.Journals, func(a, b pb.ListResponse_Journal) int {
		return bytes.Compare([]byte(a.Spec.Name), []byte(b.Spec.Name))
	})
	return resp
}

// reader decodes the messages of a journal from an offset, as Gazette's
// message.ReadUncommittedIter does from a read of the brokers.
type reader struct {
	spec      *pb.JournalSpec
	newMsg    message.NewMessageFunc
	offset    pb.Offset // Of the first byte not yet taken into br.
	end       pb.Offset // Read through, if not -1.
	br        *bufio.Reader
	src       bytes.Reader
	unmarshal message.UnmarshalFunc
	js        *journals
}

// newReader returns a reader of journal name from offset through end (-1
// reads through the content appended by each call of next).
func (js *journals) newReader(name pb.Journal, offset, end pb.Offset, newMsg message.NewMessageFunc) (*reader, error) {
	var spec, _ = js.content(name)
	var framing, err = message.FramingByContentType(spec.LabelSet.ValueOf(labels.ContentType))
	if err != nil {
		return nil, fmt.Errorf("journal %s: %w", name, err)
	}
	var r = &reader{spec: spec, newMsg: newMsg, offset: offset, end: end, js: js}
	r.br = bufio.NewReader(&r.src)
	r.unmarshal = framing.NewUnmarshalFunc(r.br)
	return r, nil
}

// next returns the next message, or io.EOF at the end of the content
// appended so far (or at r.end).
func (r *reader) next() (message.Envelope, error) {
	if r.src.Len() == 0 && r.br.Buffered() == 0 {
		// Take the content appended since.
		var _, content = r.js.content(r.spec.Name)
		if r.end != -1 {
			content = content[:min(len(content), int(r.end))]
		}
		if int(r.offset) >= len(content) {
			return message.Envelope{}, io.EOF
		}
		r.src.Reset(content[r.offset:])
		r.offset = pb.Offset(len(content))
	}
	var begin = r.at()
	var msg, err = r.newMsg(r.spec)
	if err != nil {
		return message.Envelope{}, fmt.Errorf("journal %s offset %d: %w", r.spec.Name, begin, err)
	}
	if err = r.unmarshal(msg); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // A message ends within every append.
		}
		return message.Envelope{}, fmt.Errorf("journal %s offset %d: %w", r.spec.Name, begin, err)
	}
	return message.Envelope{Journal: r.spec, Begin: begin, End: r.at(), Message: msg}, nil
}

// at is the offset of the next byte to decode.
func (r *reader) at() pb.Offset {
	return r.offset - pb.Offset(r.src.Len()) - pb.Offset(r.br.Buffered())
}

// Append serves an append of content to a journal: the journal appends it
// whole once the client sends the empty chunk that commits it.
func (js *journals) Append(ctx context.Context, _ ...grpc.CallOption) (pb.Journal_AppendClient, error) {
	return &appendStream{ctx: ctx, js: js}, nil
}

// Route returns an empty route: there are no brokers.
func (*journals) Route(context.Context, string) pb.Route { return pb.Route{Primary: -1} }

// UpdateRoute does nothing.
func (*journals) UpdateRoute(string, *pb.Route) {}

// IsNoopRouter reports true: there is no route to keep.
func (*journals) IsNoopRouter() bool { return true }

var errUnimplemented = status.Error(codes.Unimplemented, "not served by a consumertest Harness")

// List is not served.
func (*journals) List(context.Context, *pb.ListRequest, ...grpc.CallOption) (pb.Journal_ListClient, error) {
	return nil, errUnimplemented
}

// Apply is not served.
func (*journals) Apply(context.Context, *pb.ApplyRequest, ...grpc.CallOption) (*pb.ApplyResponse, error) {
	return nil, errUnimplemented
}

// Read is not served: the harness reads its journals directly.
func (*journals) Read(context.Context, *pb.ReadRequest, ...grpc.CallOption) (pb.Journal_ReadClient, error) {
	return nil, errUnimplemented
}

// Replicate is not served.
func (*journals) Replicate(context.Context, ...grpc.CallOption) (pb.Journal_ReplicateClient, error) {
	return nil, errUnimplemented
}

// ListFragments is not served.
func (*journals) ListFragments(context.Context, *pb.FragmentsRequest, ...grpc.CallOption) (*pb.FragmentsResponse, error) {
	return nil, errUnimplemented
}

// FragmentStoreHealth is not served.
func (*journals) FragmentStoreHealth(context.Context, *pb.FragmentStoreHealthRequest, ...grpc.CallOption) (*pb.FragmentStoreHealthResponse, error) {
	return nil, errUnimplemented
}

// header is the header of the harness's responses.
var header = pb.Header{
	ProcessId: pb.ProcessSpec_ID{Zone: "local", Suffix: "consumertest"},
	Route:     pb.Route{Primary: -1},
	Etcd:      pb.Header_Etcd{ClusterId: 1, MemberId: 1, Revision: 1, RaftTerm: 1},
}

// appendStream is the client stream of an Append RPC: its first request
// names the journal, then come chunks of content, and an empty chunk
// commits them.
type appendStream struct {
	ctx     context.Context
	js      *journals
	req     *pb.AppendRequest
	content []byte
	resp    *pb.AppendResponse // Set once committed.
	recv    int                // Responses received.
}

func (s *appendStream) SendMsg(m any) error {
	var req = m.(*pb.AppendRequest)
	switch {
	case s.resp != nil:
		return io.EOF // The RPC is over.
	case s.req == nil:
		s.req = req
	case len(req.Content) != 0:
		s.content = append(s.content, req.Content...)
	default:
		s.commit()
	}
	return nil
}

// commit appends the content sent, and sets the response.
func (s *appendStream) commit() {
	var begin, end, ok = s.js.append(s.req.Journal, s.content)
	s.resp = &pb.AppendResponse{Status: pb.Status_JOURNAL_NOT_FOUND, Header: header}
	if ok {
		s.resp.Status = pb.Status_OK
		s.resp.Commit = &pb.Fragment{Journal: s.req.Journal, Begin: begin, End: end, CompressionCodec: pb.CompressionCodec_NONE}
		s.resp.Registers = new(pb.LabelSet)
	}
}

func (s *appendStream) RecvMsg(m any) error {
	if err := s.ctx.Err(); err != nil {
		return err
	}
	if s.resp == nil || s.recv != 0 {
		return io.EOF // Not committed (aborted), or the response was received.
	}
	s.recv++
	*m.(*pb.AppendResponse) = *s.resp
	return nil
}

func (s *appendStream) Send(req *pb.AppendRequest) error { return s.SendMsg(req) }

func (s *appendStream) CloseAndRecv() (*pb.AppendResponse, error) {
	var resp = new(pb.AppendResponse)
	if err := s.RecvMsg(resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func (s *appendStream) CloseSend() error             { return nil }
func (s *appendStream) Context() context.Context     { return s.ctx }
func (s *appendStream) Header() (metadata.MD, error) { return nil, nil }
func (s *appendStream) Trailer() metadata.MD         { return nil }
