package console

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "go.gazette.dev/core/broker/protocol"
	"google.golang.org/grpc/codes"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// QueryMethod is a read rpc of a queries service that a group's members
// serve, as their gRPC server reflection describes it.
type QueryMethod struct {
	// Service is the service's full name, and Name the rpc's.
	Service, Name string
	// Kind is GET or SCAN, and Table the table it reads.
	Kind, Table string
	// Doc is the rpc's leading comment, if the descriptors carry it.
	Doc  string
	desc protoreflect.MethodDescriptor
	read *gcv1.Read
}

// FullName is Service/Name.
func (m *QueryMethod) FullName() string { return m.Service + "/" + m.Name }

// Scan reports whether the rpc is a SCAN.
func (m *QueryMethod) Scan() bool { return m.read.GetKind() == gcv1.ReadKind_READ_KIND_SCAN }

// Field is an input of the form of a request: a field of the request
// message, or of a message field of it (named by a dotted path).
type Field struct {
	// Path is the field's JSON name, dotted below the request.
	Path string
	// Label names it for people: its proto name, dotted.
	Label string
	// Kind is its protobuf kind ("string", "int64", "bool", "enum", ...).
	Kind string
	// Enum lists an enum's value names.
	Enum []string
	// Value is the value the form was submitted with.
	Value string
}

// Fields returns the inputs of the form of the method's request: its
// scalar fields, and those of its message fields (a SCAN's start and end
// rows) one level down, leaving out the page token, which paging sets.
func (m *QueryMethod) Fields(values url.Values) []Field {
	var skip = m.read.GetPageTokenField()
	if skip == "" && m.Scan() {
		skip = "page_token"
	}
	var out []Field
	var add func(md protoreflect.MessageDescriptor, path, label string, depth int)
	add = func(md protoreflect.MessageDescriptor, path, label string, depth int) {
		var fields = md.Fields()
		for i := range fields.Len() {
			var fd = fields.Get(i)
			if depth == 0 && string(fd.Name()) == skip || fd.IsList() || fd.IsMap() {
				continue
			}
			var f = Field{Path: path + fd.JSONName(), Label: label + string(fd.Name()), Kind: fd.Kind().String()}
			switch {
			case fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() == "google.protobuf.Timestamp":
				f.Kind = "timestamp"
			case fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind:
				if depth == 0 {
					add(fd.Message(), f.Path+".", f.Label+".", depth+1)
				}
				continue
			case fd.Kind() == protoreflect.EnumKind:
				var vals = fd.Enum().Values()
				for j := range vals.Len() {
					f.Enum = append(f.Enum, string(vals.Get(j).Name()))
				}
			}
			f.Value = values.Get(f.Path)
			out = append(out, f)
		}
	}
	add(m.desc.Input(), "", "", 0)
	return out
}

// QueryResult is the answer to a query: its rows, as a table.
type QueryResult struct {
	Columns []string
	Rows    [][]string
	// NextPageToken is a SCAN's token of its next page, empty after the
	// last.
	NextPageToken string
	// NotFound is set for a GET of a key without a row.
	NotFound bool
}

// reflected are the queries methods a member of a group describes.
type reflected struct {
	at      time.Time
	methods []*QueryMethod
}

// reflector reads the queries services of groups through the gRPC server
// reflection of their members, and keeps what it read for a while.
type reflector struct {
	mu    sync.Mutex
	cache map[pb.Endpoint]reflected
}

// reflectTTL is how long the methods reflected of a member are kept.
const reflectTTL = 30 * time.Second

// methods returns the queries methods of the member at ep.
func (c *Console) methods(ctx context.Context, ep pb.Endpoint) ([]*QueryMethod, error) {
	c.refl.mu.Lock()
	if r, ok := c.refl.cache[ep]; ok && time.Since(r.at) < reflectTTL {
		c.refl.mu.Unlock()
		return r.methods, nil
	}
	c.refl.mu.Unlock()

	var files, err = c.reflectFiles(ctx, ep)
	if err != nil {
		return nil, err
	}
	var out []*QueryMethod
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		var svcs = fd.Services()
		for i := range svcs.Len() {
			var sd = svcs.Get(i)
			if !proto.HasExtension(sd.Options(), gcv1.E_Queries) {
				continue
			}
			var methods = sd.Methods()
			for j := range methods.Len() {
				var md = methods.Get(j)
				var read, _ = proto.GetExtension(md.Options(), gcv1.E_Read).(*gcv1.Read)
				if read == nil {
					continue
				}
				var kind = "GET"
				if read.GetKind() == gcv1.ReadKind_READ_KIND_SCAN {
					kind = "SCAN"
				}
				out = append(out, &QueryMethod{Service: string(sd.FullName()), Name: string(md.Name()), Kind: kind,
					Table: read.GetTable(), Doc: strings.TrimSpace(fd.SourceLocations().ByDescriptor(md).LeadingComments), desc: md, read: read})
			}
		}
		return true
	})
	slices.SortFunc(out, func(a, b *QueryMethod) int { return strings.Compare(a.FullName(), b.FullName()) })
	c.refl.mu.Lock()
	c.refl.cache[ep] = reflected{at: time.Now(), methods: out}
	c.refl.mu.Unlock()
	return out, nil
}

// reflectFiles reads, through the server reflection of the member at ep,
// the files declaring its services and their dependencies.
func (c *Console) reflectFiles(ctx context.Context, ep pb.Endpoint) (*protoregistry.Files, error) {
	var conn, err = c.members.Conn(ep)
	if err != nil {
		return nil, err
	}
	var ctx2, cancel = context.WithTimeout(ctx, c.g.timeout)
	defer cancel()
	stream, err := reflectpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx2)
	if err != nil {
		return nil, fmt.Errorf("server reflection of member %s: %w", ep, err)
	}
	defer func() { _ = stream.CloseSend() }()
	var ask = func(req *reflectpb.ServerReflectionRequest) (*reflectpb.ServerReflectionResponse, error) {
		if err := stream.Send(req); err != nil {
			return nil, fmt.Errorf("server reflection of member %s: %w", ep, err)
		}
		var resp, err = stream.Recv()
		if err != nil {
			return nil, fmt.Errorf("server reflection of member %s: %w", ep, err)
		} else if e := resp.GetErrorResponse(); e != nil {
			return nil, &reflectionError{member: ep, asked: req.String(), code: codes.Code(e.ErrorCode), message: e.ErrorMessage}
		}
		return resp, nil
	}
	resp, err := ask(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}})
	if err != nil {
		return nil, err
	}
	var files = make(map[string]*descriptorpb.FileDescriptorProto)
	var add = func(resp *reflectpb.ServerReflectionResponse) error {
		for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
			var fd = new(descriptorpb.FileDescriptorProto)
			if err := proto.Unmarshal(b, fd); err != nil {
				return fmt.Errorf("server reflection of member %s: decoding a file: %w", ep, err)
			}
			files[fd.GetName()] = fd
		}
		return nil
	}
	for _, svc := range resp.GetListServicesResponse().GetService() {
		if strings.HasPrefix(svc.Name, "grpc.") {
			continue // gRPC's own: health, reflection, channelz.
		}
		var r, err = ask(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: svc.Name}})
		var notServed *reflectionError
		if errors.As(err, &notServed) {
			// Gazette's Shard API, whose gogo descriptors reflection does
			// not serve: not a queries service.
			slog.Debug("console: a service's descriptors are not served by reflection", "member", ep, "service", svc.Name, "err", err)
			continue
		} else if err != nil {
			return nil, err
		} else if err = add(r); err != nil {
			return nil, err
		}
	}
	// Dependencies the server did not send (it sends each file once a
	// stream), but those it does not serve: queries services are of
	// protobuf-go's descriptors, which it serves whole.
	var unserved = make(map[string]bool)
	for missing := true; missing; {
		missing = false
		for _, fd := range files {
			for _, dep := range fd.GetDependency() {
				if _, ok := files[dep]; ok || unserved[dep] {
					continue
				}
				var r, err = ask(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_FileByFilename{FileByFilename: dep}})
				var notServed *reflectionError
				if errors.As(err, &notServed) {
					// A file of gogo protobuf's, which Gazette's own
					// services import: left unresolved.
					unserved[dep] = true
					continue
				} else if err != nil {
					return nil, err
				} else if err = add(r); err != nil {
					return nil, err
				}
				missing = true
			}
		}
	}
	var set = new(descriptorpb.FileDescriptorSet)
	for _, fd := range files {
		set.File = append(set.File, fd)
	}
	reg, err := protodesc.FileOptions{AllowUnresolvable: true}.NewFiles(set)
	if err != nil {
		return nil, fmt.Errorf("server reflection of member %s: %w", ep, err)
	}
	return reg, nil
}

// query calls method through the member at ep (which routes it to the
// shard, or shards, answering it) with the request the form values give,
// and returns its rows. A call failing Unavailable (its shard between
// primaries) is retried until ctx is done.
func (c *Console) query(ctx context.Context, ep pb.Endpoint, m *QueryMethod, values url.Values) (*QueryResult, error) {
	var req = dynamicpb.NewMessage(m.desc.Input())
	if err := formRequest(m, values, req); err != nil {
		return nil, err
	}
	var conn, err = c.members.Conn(ep)
	if err != nil {
		return nil, err
	}
	callCtx, err := c.members.Authorizer().Authorize(ctx, pb.Claims{Capability: pb.Capability_READ}, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("authorizing the query: %w", err)
	}
	var resp = dynamicpb.NewMessage(m.desc.Output())
	for wait := 25 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		err = conn.Invoke(callCtx, "/"+m.FullName(), req, resp)
		if status.Code(err) != codes.Unavailable {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: %w", m.FullName(), err)
		case <-time.After(wait):
		}
	}
	if status.Code(err) == codes.NotFound && !m.Scan() {
		return &QueryResult{NotFound: true}, nil
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", m.FullName(), err)
	}
	return result(m, resp)
}

// formRequest sets req from the form values of m's fields, and the page
// token: the values are made JSON of their fields' kinds, which protojson
// reads.
func formRequest(m *QueryMethod, values url.Values, req *dynamicpb.Message) error {
	var obj = make(map[string]any)
	for _, f := range m.Fields(values) {
		if f.Value == "" {
			continue
		}
		var v any = f.Value
		switch f.Kind {
		case "bool":
			b, err := strconv.ParseBool(f.Value)
			if err != nil {
				return fmt.Errorf("%s: %q is not true or false", f.Label, f.Value)
			}
			v = b
		case "int32", "sint32", "sfixed32", "int64", "sint64", "sfixed64":
			if _, err := strconv.ParseInt(f.Value, 10, 64); err != nil {
				return fmt.Errorf("%s: %q is not an integer", f.Label, f.Value)
			}
		case "uint32", "fixed32", "uint64", "fixed64":
			if _, err := strconv.ParseUint(f.Value, 10, 64); err != nil {
				return fmt.Errorf("%s: %q is not an unsigned integer", f.Label, f.Value)
			}
		case "float", "double":
			x, err := strconv.ParseFloat(f.Value, 64)
			if err != nil {
				return fmt.Errorf("%s: %q is not a number", f.Label, f.Value)
			}
			v = x
		}
		var at = obj
		var path = strings.Split(f.Path, ".")
		for _, p := range path[:len(path)-1] {
			var next, ok = at[p].(map[string]any)
			if !ok {
				next = make(map[string]any)
				at[p] = next
			}
			at = next
		}
		at[path[len(path)-1]] = v
	}
	if tok := values.Get("page_token"); tok != "" && m.Scan() {
		var name = cmp.Or(m.read.GetPageTokenField(), "page_token")
		var fd = m.desc.Input().Fields().ByName(protoreflect.Name(name))
		if fd == nil {
			return fmt.Errorf("%s has no page token field %s", m.desc.Input().FullName(), name)
		}
		obj[fd.JSONName()] = tok
	}
	var b, err = json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("encoding the request: %w", err)
	}
	if err = protojson.Unmarshal(b, req); err != nil {
		return fmt.Errorf("the request %s: %w", m.desc.Input().FullName(), err)
	}
	return nil
}

// result is the table of the rows of resp, an answer to m: a GET's row
// (the response, or its row_field, or its one message field), or a SCAN's
// rows (its rows_field, or its one repeated message field).
func result(m *QueryMethod, resp *dynamicpb.Message) (*QueryResult, error) {
	var out = new(QueryResult)
	var fields = resp.Descriptor().Fields()
	var rows []protoreflect.Message
	if m.Scan() {
		var fd = fieldNamed(fields, m.read.GetRowsField(), func(fd protoreflect.FieldDescriptor) bool {
			return fd.IsList() && fd.Kind() == protoreflect.MessageKind
		})
		if fd == nil {
			return nil, fmt.Errorf("%s: its response %s has no repeated field of rows", m.FullName(), resp.Descriptor().FullName())
		}
		var list = resp.Get(fd).List()
		for i := range list.Len() {
			rows = append(rows, list.Get(i).Message())
		}
		if tok := fields.ByName(protoreflect.Name(cmp.Or(m.read.GetNextPageTokenField(), "next_page_token"))); tok != nil {
			var v = resp.Get(tok)
			if tok.Kind() == protoreflect.BytesKind {
				out.NextPageToken = string(v.Bytes())
			} else {
				out.NextPageToken = v.String()
			}
		}
	} else {
		var row protoreflect.Message = resp
		if fd := fieldNamed(fields, m.read.GetRowField(), nil); fd != nil && fd.Kind() == protoreflect.MessageKind {
			row = resp.Get(fd).Message()
		} else if m.read.GetRowField() == "" && fields.Len() == 1 && fields.Get(0).Kind() == protoreflect.MessageKind && !fields.Get(0).IsList() {
			row = resp.Get(fields.Get(0)).Message()
		}
		rows = append(rows, row)
	}
	var rowDesc protoreflect.MessageDescriptor
	if len(rows) != 0 {
		rowDesc = rows[0].Descriptor()
	} else if m.Scan() {
		var fd = fieldNamed(fields, m.read.GetRowsField(), func(fd protoreflect.FieldDescriptor) bool {
			return fd.IsList() && fd.Kind() == protoreflect.MessageKind
		})
		rowDesc = fd.Message()
	}
	if rowDesc != nil {
		var rf = rowDesc.Fields()
		for i := range rf.Len() {
			out.Columns = append(out.Columns, string(rf.Get(i).Name()))
		}
	}
	var marshal = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}
	for _, row := range rows {
		var b, err = marshal.Marshal(row.Interface())
		if err != nil {
			return nil, fmt.Errorf("encoding a row: %w", err)
		}
		var obj map[string]json.RawMessage
		if err = json.Unmarshal(b, &obj); err != nil {
			return nil, fmt.Errorf("decoding a row: %w", err)
		}
		var cells = make([]string, len(out.Columns))
		for i, col := range out.Columns {
			var raw = obj[col]
			var s string
			if json.Unmarshal(raw, &s) == nil {
				cells[i] = s
			} else {
				cells[i] = string(raw)
			}
		}
		out.Rows = append(out.Rows, cells)
	}
	return out, nil
}

// fieldNamed returns the field name of fields, or, if name is empty, the
// one field that ok accepts; nil if there is none (or several).
func fieldNamed(fields protoreflect.FieldDescriptors, name string, ok func(protoreflect.FieldDescriptor) bool) protoreflect.FieldDescriptor {
	if name != "" {
		return fields.ByName(protoreflect.Name(name))
	} else if ok == nil {
		return nil
	}
	var found protoreflect.FieldDescriptor
	for i := range fields.Len() {
		if fd := fields.Get(i); ok(fd) {
			if found != nil {
				return nil
			}
			found = fd
		}
	}
	return found
}

// reflectionError is an error the server reflection of a member answered.
type reflectionError struct {
	member  pb.Endpoint
	asked   string
	code    codes.Code
	message string
}

func (e *reflectionError) Error() string {
	return fmt.Sprintf("server reflection of member %s, asked %s: %s: %s", e.member, e.asked, e.code, e.message)
}

// errNoMember is the error of a group without a live member to ask.
var errNoMember = errors.New("no member of the group is running: its queries are served by its members")

// stateView is what the state browser shows: the groups, the queries
// methods of the group chosen, the form of the method chosen, and the rows
// its query answered.
type stateView struct {
	Groups  []string
	Group   string
	Member  string
	Methods []*QueryMethod
	Method  *QueryMethod
	Fields  []Field
	// Ran is set once the form was submitted; Result is its answer.
	Ran    bool
	Result *QueryResult
	// Page is the number of the page shown, from 1; NextURL is the link to
	// the next page, FirstURL to the first.
	Page              int
	NextURL, FirstURL string
}

// serveState serves the typed state browser: pick a group, then one of the
// queries methods its members serve (as their server reflection describes
// them), fill the form of its request, and see the rows it answers, a page
// at a time.
func (c *Console) serveState(w http.ResponseWriter, r *http.Request) {
	var q = r.URL.Query()
	var rd = c.s.latest(r.Context())
	var st = &stateView{Group: q.Get("group"), Ran: q.Get("run") == "1", Page: 1}
	var v = &view{Title: "State", Nav: "state", Errors: rd.Errors, State: st}
	for _, g := range rd.Groups {
		st.Groups = append(st.Groups, g.Name)
	}
	if st.Group == "" && len(st.Groups) != 0 {
		st.Group = st.Groups[0]
	}
	var grp = rd.Group(st.Group)
	if grp == nil {
		if st.Group != "" {
			v.Errors = append(v.Errors, fmt.Sprintf("no consumer group %q (under %s) in etcd", st.Group, c.g.root))
		}
		c.render(w, r, "state", v)
		return
	}
	v.Group = grp

	// The methods, from the first member that describes them.
	var ep pb.Endpoint
	var errs []string
	for _, m := range grp.Members {
		var methods, err = c.methods(r.Context(), m.Endpoint)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		ep, st.Member, st.Methods = m.Endpoint, m.ID, methods
		break
	}
	switch {
	case len(grp.Members) == 0:
		v.Errors = append(v.Errors, errNoMember.Error())
	case ep == "":
		v.Errors = append(v.Errors, errs...)
	case len(st.Methods) == 0:
		v.Errors = append(v.Errors, fmt.Sprintf("the members of group %s serve no queries service (one annotated (gazconsumer.v1.queries))", grp.Name))
	}
	var name = q.Get("method")
	for _, m := range st.Methods {
		if m.FullName() == name || name == "" && st.Method == nil {
			st.Method = m
		}
	}
	if name != "" && st.Method == nil && ep != "" {
		v.Errors = append(v.Errors, fmt.Sprintf("the members of group %s serve no queries method %q", grp.Name, name))
	}
	if st.Method == nil {
		c.render(w, r, "state", v)
		return
	}
	st.Fields = st.Method.Fields(q)
	if st.Ran {
		var ctx, cancel = context.WithTimeout(r.Context(), 10*time.Second)
		defer cancel()
		var res, err = c.query(ctx, ep, st.Method, q)
		if err != nil {
			v.Errors = append(v.Errors, err.Error())
		}
		st.Result = res
		if n, err := strconv.Atoi(q.Get("page")); err == nil && n > 1 {
			st.Page = n
		}
		if res != nil && res.NextPageToken != "" {
			var next = cloneValues(q)
			next.Set("page_token", res.NextPageToken)
			next.Set("page", strconv.Itoa(st.Page+1))
			st.NextURL = "/state?" + next.Encode()
		}
		if st.Page > 1 {
			var first = cloneValues(q)
			first.Del("page_token")
			first.Del("page")
			st.FirstURL = "/state?" + first.Encode()
		}
	}
	c.render(w, r, "state", v)
}

func cloneValues(v url.Values) url.Values {
	var out = make(url.Values, len(v))
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}
