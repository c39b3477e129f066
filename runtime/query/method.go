package query

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/gazconsumer/gazconsumer/keyenc"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/table"
)

// Service describes a queries service to a Server and a Client: generated
// code declares one for each service annotated (gazconsumer.v1.queries).
type Service struct {
	// Name is the service's full protobuf name, e.g.
	// "acme.shop.v1.SpendQueries".
	Name string
	// Consumer is the full protobuf name of the consumer whose tables the
	// service reads.
	Consumer string
	// File is the .proto file declaring the service.
	File string
	// Partitions is the label selector of the partition journals that a
	// request's partition key maps among: those of the first journal
	// message the consumer reads having a partition key. Empty if the
	// consumer reads none: every request is then answered by every shard.
	Partitions string
	// Methods are the service's rpcs, in the order declared.
	Methods []*Method
}

// method returns the method named name, or nil.
func (s *Service) method(name string) *Method {
	for _, m := range s.Methods {
		if m.name == name {
			return m
		}
	}
	return nil
}

// FullMethod returns the gRPC method name of the rpc named name:
// "/" + s.Name + "/" + name.
func (s *Service) FullMethod(name string) string { return "/" + s.Name + "/" + name }

// Method is one read rpc of a Service, built by Get or Scan.
type Method struct {
	name    string
	newReq  func() proto.Message
	newResp func() proto.Message
	// prepare validates a request, and returns how to answer it.
	prepare func(proto.Message) (*op, error)
}

// Name returns the rpc's name.
func (m *Method) Name() string { return m.name }

// op is how a request is answered: the partition key routing it, how a
// shard reads its answer, and how the answers of shards merge.
type op struct {
	partition []byte // Nil if the request is answered by every shard.
	routed    bool
	// read reads a shard's answer from its committed state.
	read func(context.Context, runtime.Reader) (proto.Message, error)
	// merge merges the answers of every shard, in shard order: a nil
	// answer is of a shard that had none (a GET's missing row).
	merge func([]proto.Message) (proto.Message, error)
	// missing describes the row of a GET, found nowhere.
	missing func() string
}

// missingIn returns the NotFound status of a GET whose row is missing
// where says.
func (o *op) missingIn(where string) error {
	return status.Errorf(codes.NotFound, "%s %s", o.missing(), where)
}

// newOf returns a function returning new messages of M's type. It asks
// for the type only when first called: generated Services are package
// variables, initialized before the descriptors of their messages.
func newOf[M proto.Message]() func() proto.Message {
	var typeOf = sync.OnceValue(func() protoreflect.MessageType {
		var zero M
		return zero.ProtoReflect().Type()
	})
	return func() proto.Message { return typeOf().New().Interface() }
}

// GetDef defines a GET rpc to Get: generated code declares one for each rpc
// annotated READ_KIND_GET. Req and Resp are its request and response
// messages; K and R the key struct and row message of the table it reads.
type GetDef[Req, Resp proto.Message, K any, R proto.Message] struct {
	// Name of the rpc.
	Name string
	// Table read.
	Table *table.Schema[K, R]
	// Partition appends to b the partition key of a request, encoded as
	// its sources' AppendPartitionKey encode theirs. Nil if requests carry
	// none: every shard is asked.
	Partition func(req Req, b []byte) []byte
	// Key returns the key of the row a request asks for, or an error
	// naming the request's field at fault (see FieldError).
	Key func(Req) (K, error)
	// Response returns the response holding row.
	Response func(row R) Resp
}

// Get returns the Method of the GET rpc d defines. A missing row is
// status NotFound.
func Get[Req, Resp proto.Message, K any, R proto.Message](d GetDef[Req, Resp, K, R]) *Method {
	return &Method{
		name:    d.Name,
		newReq:  newOf[Req](),
		newResp: newOf[Resp](),
		prepare: func(m proto.Message) (*op, error) {
			var req = m.(Req)
			var key, err = d.Key(req)
			if err != nil {
				return nil, invalid(err)
			}
			var storeKey = d.Table.AppendKey(nil, key, d.Table.KeyFields())
			var o = &op{
				missing: func() string { return fmt.Sprintf("table %s has no row of key %+v", d.Table.Name(), key) },
				read: func(_ context.Context, r runtime.Reader) (proto.Message, error) {
					var v, found, err = r.Get(storeKey)
					if err != nil {
						return nil, err
					} else if !found {
						return nil, nil
					}
					row, err := d.Table.Row(storeKey, v)
					if err != nil {
						return nil, status.Error(codes.Internal, err.Error())
					}
					return d.Response(row), nil
				},
				merge: func(answers []proto.Message) (proto.Message, error) {
					for _, a := range answers {
						if a != nil {
							return a, nil
						}
					}
					return nil, nil
				},
			}
			if d.Partition != nil {
				o.partition, o.routed = d.Partition(req, nil), true
			}
			return o, nil
		},
	}
}

// ScanDef defines a SCAN rpc to Scan: generated code declares one for each
// rpc annotated READ_KIND_SCAN. Req and Resp are its request and response
// messages; K and R the key struct and row message of the table it reads.
type ScanDef[Req, Resp proto.Message, K any, R proto.Message] struct {
	// Name of the rpc.
	Name string
	// Table read.
	Table *table.Schema[K, R]
	// Partition appends to b the partition key of a request, as GetDef's.
	// Nil if requests carry none: every shard is asked, and their rows
	// merged in key order.
	Partition func(req Req, b []byte) []byte
	// Prefix returns the key whose first fields key fields the rows
	// scanned share (zero fields: the whole table), or an error naming the
	// request's field at fault.
	Prefix func(Req) (key K, fields int, err error)
	// Range returns the keys bounding the rows scanned within the prefix,
	// from start (included) to end (excluded); a nil key leaves its side
	// open. Nil if requests have no range.
	Range func(Req) (start, end *K, err error)
	// Limit returns the limit of rows a page a request asks for, and
	// LimitField names its field. Nil if requests have none.
	Limit      func(Req) int64
	LimitField string
	// PageToken returns the page token of a request (see ParseToken), and
	// PageTokenField names its field.
	PageToken      func(Req) ([]byte, error)
	PageTokenField string
	// DefaultLimit is the rows of a page of a request leaving its limit
	// zero, and MaxLimit the most rows of a page.
	DefaultLimit, MaxLimit int
	// Response returns the response holding rows, and the token of the
	// next page (see FormatToken), nil after the last.
	Response func(rows []R, next []byte) Resp
	// Rows and Next return the rows and the next page token a response
	// holds.
	Rows func(Resp) []R
	Next func(Resp) ([]byte, error)
}

// Scan returns the Method of the SCAN rpc d defines. A page holds the
// first rows, in key order, after the page token (the key of the last row
// of the previous page), up to the request's limit.
func Scan[Req, Resp proto.Message, K any, R proto.Message](d ScanDef[Req, Resp, K, R]) *Method {
	return &Method{
		name:    d.Name,
		newReq:  newOf[Req](),
		newResp: newOf[Resp](),
		prepare: func(m proto.Message) (*op, error) {
			var req = m.(Req)
			var lo, hi, limit, err = d.span(req)
			if err != nil {
				return nil, invalid(err)
			}
			var o = &op{
				read: func(_ context.Context, r runtime.Reader) (proto.Message, error) {
					var rows []R
					var next []byte
					var derr error
					var err = r.Scan(lo, hi, func(k, v []byte) bool {
						if len(rows) == limit {
							// Keys encode canonically: the last row's is its own.
							next = d.Table.AppendKey(nil, d.Table.KeyOf(rows[len(rows)-1]), d.Table.KeyFields())
							return false
						}
						var row R
						if row, derr = d.Table.Row(k, v); derr != nil {
							return false
						}
						rows = append(rows, row)
						return true
					})
					if err != nil {
						return nil, err
					} else if derr != nil {
						return nil, status.Error(codes.Internal, derr.Error())
					}
					return d.Response(rows, next), nil
				},
				merge: func(answers []proto.Message) (proto.Message, error) { return d.merge(answers, limit) },
			}
			if d.Partition != nil {
				o.partition, o.routed = d.Partition(req, nil), true
			}
			return o, nil
		},
	}
}

// span returns the store keys [lo, hi) that req scans, after its page
// token, and its limit.
func (d *ScanDef[Req, Resp, K, R]) span(req Req) (lo, hi []byte, limit int, err error) {
	var prefix, fields, perr = d.Prefix(req)
	if perr != nil {
		return nil, nil, 0, perr
	}
	lo = d.Table.AppendKey(nil, prefix, fields)
	hi = keyenc.PrefixEnd(lo)
	if d.Range != nil {
		var start, end, err = d.Range(req)
		if err != nil {
			return nil, nil, 0, err
		}
		if start != nil {
			if k := d.Table.AppendKey(nil, *start, d.Table.KeyFields()); bytes.Compare(k, lo) > 0 {
				lo = k
			}
		}
		if end != nil {
			if k := d.Table.AppendKey(nil, *end, d.Table.KeyFields()); bytes.Compare(k, hi) < 0 {
				hi = k
			}
		}
	}
	token, err := d.PageToken(req)
	if err != nil {
		return nil, nil, 0, FieldError(d.PageTokenField, "%v", err)
	}
	if len(token) != 0 {
		if bytes.Compare(token, lo) < 0 || bytes.Compare(token, hi) >= 0 {
			return nil, nil, 0, FieldError(d.PageTokenField, "the token is not of a page of this request's scan")
		}
		lo = append(token[:len(token):len(token)], 0) // The least key after it.
	}
	limit = d.DefaultLimit
	if d.Limit != nil {
		switch n := d.Limit(req); {
		case n < 0:
			return nil, nil, 0, FieldError(d.LimitField, "the limit must not be negative, is %d", n)
		case n > int64(d.MaxLimit):
			limit = d.MaxLimit
		case n > 0:
			limit = int(n)
		}
	}
	return lo, hi, max(1, limit), nil
}

// merge merges the pages of every shard: the first limit rows of all, in
// key order, and the token of the next page if a shard has more rows or
// rows were left out.
func (d *ScanDef[Req, Resp, K, R]) merge(answers []proto.Message, limit int) (proto.Message, error) {
	type keyed struct {
		key []byte
		row R
	}
	var all []keyed
	var more bool
	for _, a := range answers {
		var resp = a.(Resp)
		for _, row := range d.Rows(resp) {
			all = append(all, keyed{d.Table.AppendKey(nil, d.Table.KeyOf(row), d.Table.KeyFields()), row})
		}
		var next, err = d.Next(resp)
		if err != nil {
			return nil, fmt.Errorf("a shard's next page token: %w", err)
		}
		more = more || len(next) != 0
	}
	// Stable: rows of one key (of shards holding a key twice) stay in
	// shard order.
	slices.SortStableFunc(all, func(a, b keyed) int { return bytes.Compare(a.key, b.key) })
	if len(all) > limit {
		all, more = all[:limit], true
	}
	var rows = make([]R, len(all))
	for i := range all {
		rows[i] = all[i].row
	}
	var next []byte
	if more && len(all) != 0 {
		next = all[len(all)-1].key
	}
	return d.Response(rows, next), nil
}

// fieldError is an error of a request's field.
type fieldError struct {
	field string
	msg   string
}

func (e *fieldError) Error() string { return "field " + e.field + ": " + e.msg }

// FieldError returns the error of a malformed field of a request, which
// answers the call with status InvalidArgument naming the field.
func FieldError(field, format string, args ...any) error {
	return &fieldError{field: field, msg: fmt.Sprintf(format, args...)}
}

// invalid returns the InvalidArgument status of err, an error of a
// request.
func invalid(err error) error {
	return status.Error(codes.InvalidArgument, "invalid request: "+err.Error())
}

// FormatToken returns the text of page token b, for a string token field:
// its unpadded URL-safe base64.
func FormatToken(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// ParseToken returns the page token of the text s that FormatToken
// returned.
func ParseToken(s string) ([]byte, error) {
	var b, err = base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("not a page token: %w", err)
	}
	return b, nil
}
