package gengc

import (
	"fmt"

	"github.com/dave/jennifer/jen"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/reflect/protoreflect"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// genQueries generates the description of queries service q to
// runtime/query, its registration, and its typed client.
func genQueries(fc *fileCtx, q *queries) {
	jf := fc.jf
	full := string(q.svc.Desc.FullName())
	n := queriesNamesOf(q)
	var methods []jen.Code
	for _, r := range q.reads {
		methods = append(methods, jen.Line().Add(genRead(fc, q, r)))
	}
	how := "A request carrying no partition key is answered by every shard."
	if q.routeBy != nil {
		how = fmt.Sprintf("A request carrying the partition key of %s (%s) is answered by the shard of its partition, among the journals of %s; one carrying none, by every shard.",
			q.routeBy.msg.Desc.FullName(), fieldNames(q.routeBy.partitionKey), q.selector)
	}
	fc.doc("%s describes queries service %s to runtime/query: members of consumer %s serve it, from their shards' committed state. %s", n.desc, full, q.consumer.svc.Desc.FullName(), how)
	jf.Var().Id(n.desc).Op("=").Op("&").Add(fc.q(pathQuery, "Service")).Custom(multiLine,
		jen.Id("Name").Op(":").Lit(full),
		jen.Id("Consumer").Op(":").Lit(string(q.consumer.svc.Desc.FullName())),
		jen.Id("File").Op(":").Lit(q.svc.Desc.ParentFile().Path()),
		jen.Id("Partitions").Op(":").Lit(q.selector),
		jen.Id("Methods").Op(":").Index().Op("*").Add(fc.q(pathQuery, "Method")).Values(append(methods, jen.Line())...),
	)
	jf.Line()
	jf.Func().Id("init").Params().Block(fc.q(pathQuery, "Register").Call(jen.Id(n.desc)))
	jf.Line()

	fc.comments(q.svc.Comments, n.client+" calls queries service "+full+".")
	jf.Comment("")
	fc.doc("%s calls queries service %s through a query.Client: one calling a member, which routes each call (query.NewClient), or one routing each call itself to the primary of its shard (query.NewRoutedClient).", n.client, full)
	jf.Type().Id(n.client).Struct(jen.Id("c").Op("*").Add(fc.q(pathQuery, "Client")))
	jf.Line()
	fc.doc("%s returns the client of %s calling through c.", n.ctor, full)
	jf.Func().Id(n.ctor).Params(jen.Id("c").Op("*").Add(fc.q(pathQuery, "Client"))).Id(n.client).Block(
		jen.Return(jen.Id(n.client).Values(jen.Id("c"))))
	jf.Line()
	for _, r := range q.reads {
		fc.comments(r.method.Comments, r.method.GoName+" calls rpc "+string(r.method.Desc.Name())+".")
		out := jen.Op("*").Add(fc.ident(r.method.Output.GoIdent))
		jf.Func().Params(jen.Id("c").Id(n.client)).Id(r.method.GoName).Params(
			jen.Id("ctx").Add(fc.q(pathContext, "Context")),
			jen.Id("req").Op("*").Add(fc.ident(r.method.Input.GoIdent)),
			jen.Id("opts").Op("...").Add(fc.q(pathGRPC, "CallOption")),
		).Params(out, jen.Error()).Block(
			jen.Id("resp").Op(":=").New(fc.ident(r.method.Output.GoIdent)),
			jen.If(jen.Id("err").Op(":=").Id("c").Dot("c").Dot("Invoke").Call(jen.Id("ctx"), jen.Id(n.desc), jen.Lit(string(r.method.Desc.Name())),
				jen.Id("req"), jen.Id("resp"), jen.Id("opts").Op("...")), jen.Id("err").Op("!=").Nil()).Block(jen.Return(jen.Nil(), jen.Id("err"))),
			jen.Return(jen.Id("resp"), jen.Nil()),
		)
		jf.Line()
	}
}

// genRead returns the query.Get or query.Scan of r.
func genRead(fc *fileCtx, q *queries, r *read) jen.Code {
	t := r.table
	tn := tableNamesOf(t)
	req := jen.Op("*").Add(fc.ident(r.method.Input.GoIdent))
	resp := jen.Op("*").Add(fc.ident(r.method.Output.GoIdent))
	row := jen.Op("*").Add(fc.ident(t.msg.GoIdent))
	reqP := func() jen.Code { return jen.Id("r").Add(req.Clone()) }
	respP := func() jen.Code { return jen.Id("r").Add(resp.Clone()) }
	rf := func(f *protogen.Field) *jen.Statement { return get(jen.Id("r"), f) }
	types := []jen.Code{req.Clone(), resp.Clone(), jen.Id(tn.key), row.Clone()}
	// The fields of the definition, in the order of its type's.
	var def []jen.Code
	field := func(name string, v jen.Code) { def = append(def, jen.Id(name).Op(":").Add(v)) }
	field("Name", jen.Lit(string(r.method.Desc.Name())))
	field("Table", jen.Id(tn.schema))
	if len(r.partition) != 0 {
		field("Partition", jen.Func().Params(reqP(), jen.Id("b").Index().Byte()).Index().Byte().Block(appendPartitionKey(fc, jen.Id("r"), r.partition)...))
	}
	var keyVals []jen.Code
	for i, f := range r.key {
		keyVals = append(keyVals, jen.Id(t.key[i].field.GoName).Op(":").Add(keyOfRow(fc, jen.Id("r"), keyField{field: f})))
	}
	key := jen.Id(tn.key).Values(keyVals...)
	if r.kind == gcv1.ReadKind_READ_KIND_GET {
		field("Key", jen.Func().Params(reqP()).Params(jen.Id(tn.key), jen.Error()).Block(jen.Return(key, jen.Nil())))
		body := []jen.Code{jen.Return(jen.Id("row"))}
		if r.row != nil {
			body = []jen.Code{
				jen.Id("x").Op(":=").New(fc.ident(r.method.Output.GoIdent)),
				set(jen.Id("x"), r.row, jen.Id("row")),
				jen.Return(jen.Id("x")),
			}
		}
		field("Response", jen.Func().Params(jen.Id("row").Add(row.Clone())).Add(resp.Clone()).Block(body...))
		return fc.q(pathQuery, "Get").Call(fc.q(pathQuery, "GetDef").Types(types...).Custom(multiLine, def...))
	}
	field("Prefix", jen.Func().Params(reqP()).Params(jen.Id(tn.key), jen.Int(), jen.Error()).Block(
		jen.Return(key, jen.Lit(len(r.key)), jen.Nil())))
	if r.start != nil || r.end != nil {
		var body []jen.Code
		for _, b := range []struct {
			name string
			f    *protogen.Field
		}{{"start", r.start}, {"end", r.end}} {
			if b.f == nil {
				continue
			}
			body = append(body, jen.If(jen.Id("v").Op(":=").Add(rf(b.f)), jen.Id("v").Op("!=").Nil()).Block(
				jen.Id("k").Op(":=").Id(tn.schema).Dot("KeyOf").Call(jen.Id("v")),
				jen.Id(b.name).Op("=").Op("&").Id("k"),
			))
		}
		body = append(body, jen.Return(jen.Id("start"), jen.Id("end"), jen.Nil()))
		field("Range", jen.Func().Params(reqP()).Params(jen.Id("start"), jen.Id("end").Op("*").Id(tn.key), jen.Err().Error()).Block(body...))
	}
	if r.limit != nil {
		field("Limit", jen.Func().Params(reqP()).Int64().Block(jen.Return(jen.Int64().Call(rf(r.limit)))))
		field("LimitField", jen.Lit(string(r.limit.Desc.Name())))
	}
	stringToken := r.token.Desc.Kind() == protoreflect.StringKind
	token, nextToken := jen.Code(jen.Return(rf(r.token), jen.Nil())), jen.Code(jen.Return(rf(r.next), jen.Nil()))
	var next jen.Code = jen.Id("next")
	if stringToken {
		token = jen.Return(fc.q(pathQuery, "ParseToken").Call(rf(r.token)))
		nextToken = jen.Return(fc.q(pathQuery, "ParseToken").Call(rf(r.next)))
		next = fc.q(pathQuery, "FormatToken").Call(jen.Id("next"))
	}
	field("PageToken", jen.Func().Params(reqP()).Params(jen.Index().Byte(), jen.Error()).Block(token))
	field("PageTokenField", jen.Lit(string(r.token.Desc.Name())))
	field("DefaultLimit", jen.Lit(r.defaultLimit))
	field("MaxLimit", jen.Lit(r.maxLimit))
	respBody := []jen.Code{
		jen.Id("x").Op(":=").New(fc.ident(r.method.Output.GoIdent)),
		set(jen.Id("x"), r.rows, jen.Id("rows")),
	}
	if !opaque(r.next) && stringToken && r.next.Desc.HasPresence() {
		// A string with presence, of the open struct API: a pointer.
		respBody = append(respBody, jen.Id("token").Op(":=").Add(next), jen.Id("x").Dot(r.next.GoName).Op("=").Op("&").Id("token"))
	} else {
		respBody = append(respBody, set(jen.Id("x"), r.next, next))
	}
	field("Response", jen.Func().Params(jen.Id("rows").Index().Add(row.Clone()), jen.Id("next").Index().Byte()).Add(resp.Clone()).Block(
		append(respBody, jen.Return(jen.Id("x")))...,
	))
	field("Rows", jen.Func().Params(respP()).Index().Add(row.Clone()).Block(jen.Return(rf(r.rows))))
	field("Next", jen.Func().Params(respP()).Params(jen.Index().Byte(), jen.Error()).Block(nextToken))
	return fc.q(pathQuery, "Scan").Call(fc.q(pathQuery, "ScanDef").Types(types...).Custom(multiLine, def...))
}
