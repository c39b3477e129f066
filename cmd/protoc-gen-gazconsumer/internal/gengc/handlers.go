package gengc

import (
	"time"

	"github.com/dave/jennifer/jen"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// durationExpr returns d as a Go expression of a time.Duration: a multiple
// of the largest unit dividing it.
func durationExpr(fc *fileCtx, d time.Duration) jen.Code {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "Hour"}, {time.Minute, "Minute"}, {time.Second, "Second"}, {time.Millisecond, "Millisecond"}, {time.Microsecond, "Microsecond"}} {
		if d%u.d == 0 {
			if d == u.d {
				return fc.q(pathTime, u.name)
			}
			return jen.Lit(int(d / u.d)).Op("*").Add(fc.q(pathTime, u.name))
		}
	}
	return fc.q(pathTime, "Duration").Call(jen.Lit(int(d)))
}

// genConsumer generates the handler interface, the transaction type and the
// runtime.Application of consumer c: a runtime.Adapter of its description.
func genConsumer(fc *fileCtx, c *consumer) {
	jf := fc.jf
	full := string(c.svc.Desc.FullName())
	n := consumerNamesOf(c)
	txnP := jen.Op("*").Id(n.txn)

	// Handler interface: one method per consumed message type, and
	// FinalizeTxn. Nothing generated supplies them, so that a handler type
	// missing one (a forgotten rpc, or one added to the .proto since) is a
	// compile error naming the method, not a shard failing at run time.
	// The service's own comments, as written.
	fc.comments(c.svc.Comments, n.handler+" handles the messages consumed by "+full+".")
	jf.Comment("")
	jf.Comment("It lists a method for every rpc of the service: an rpc added to the .proto")
	jf.Comment("breaks the build of a handler until it implements the rpc. Optional hooks")
	jf.Comment("are detected on the handler: runtime.BeginFinisher.")
	var methods []jen.Code
	for _, h := range c.handlers {
		in := h.method.Input
		methods = append(methods, commentLines(commentText(h.method.Comments, h.method.GoName+" handles a "+string(in.Desc.FullName())+" read by the shard."))...)
		methods = append(methods,
			jen.Id(h.method.GoName).Params(jen.Id("tx").Add(txnP.Clone()), jen.Id("msg").Op("*").Add(fc.ident(in.GoIdent))).Error(),
		)
	}
	for _, h := range c.timerHandlers {
		in := h.method.Input
		methods = append(methods, commentLines(commentText(h.method.Comments, h.method.GoName+" handles the firing of a "+string(in.Desc.FullName())+" timer."))...)
		methods = append(methods,
			jen.Id(h.method.GoName).Params(jen.Id("tx").Add(txnP.Clone()), jen.Id("msg").Op("*").Add(fc.ident(in.GoIdent))).Error(),
		)
	}
	methods = append(methods,
		jen.Comment("FinalizeTxn is called as the transaction ends: by its return, every"),
		jen.Comment("in-memory effect of the transaction must be written to tables and every"),
		jen.Comment("message to publish must be published."),
		jen.Id("FinalizeTxn").Params(jen.Id("tx").Add(txnP.Clone())).Error(),
	)
	jf.Type().Id(n.handler).Interface(methods...)
	jf.Line()

	fc.doc("%s is the transaction within which a %s runs: its tables, and the runtime.Txn it embeds (the shard, its store, the envelope of the message handled, and Publish). A shard's handlers share one for the whole transaction, set anew for each call: a handler may not keep it past its return.", n.txn, n.handler)
	fields := []jen.Code{fc.q(pathRuntime, "Txn")}
	for _, t := range c.tables {
		fields = append(fields,
			jen.Commentf("%s is table %q.", t.msg.GoIdent.GoName, t.name),
			jen.Id(t.msg.GoIdent.GoName).Add(fc.q(string(t.msg.GoIdent.GoImportPath), tableNamesOf(t).table)))
	}
	for _, t := range c.timers {
		tn := tableNamesOf(t)
		fields = append(fields,
			jen.Commentf("%s are the %s timers.", tn.table, t.msg.GoIdent.GoName),
			jen.Id(tn.table).Add(fc.q(string(t.msg.GoIdent.GoImportPath), tn.table)))
	}
	jf.Type().Id(n.txn).Struct(fields...)
	jf.Line()

	for _, p := range c.publishes {
		how := "chosen by its partition key"
		if len(p.journal.partitionKey) == 0 {
			how = "chosen at random"
		}
		fc.doc("%s publishes msg within the transaction to a partition journal, among those selected by %q, %s. Readers see it once the transaction commits, exactly once.", publishName(p), p.selector, how)
		jf.Func().Params(jen.Id("tx").Add(txnP.Clone())).Id(publishName(p)).Params(jen.Id("msg").Op("*").Add(fc.ident(p.journal.msg.GoIdent))).Error().Block(
			jen.Return(jen.Id("tx").Dot("Publish").Call(jen.Id("msg"))),
		)
		jf.Line()
	}

	fc.doc("%s runs a %s as a runtime.Application: see runtime.Adapter.", n.app, n.handler)
	jf.Type().Id(n.app).Op("=").Add(fc.q(pathRuntime, "Adapter")).Types(jen.Id(n.handler), txnP.Clone())
	jf.Line()

	fc.doc("%s returns an Application running handler, whose store is opened by stores and whose published messages are routed among the journals listed by journals.", n.ctor)
	jf.Func().Id(n.ctor).Params(
		jen.Id("handler").Id(n.handler), jen.Id("stores").Add(fc.q(pathRuntime, "StoreOpener")), jen.Id("journals").Add(fc.q(pathRuntime, "PartitionLister")),
	).Params(jen.Op("*").Id(n.app), jen.Error()).Block(
		jen.Return(fc.q(pathRuntime, "NewAdapter").Call(jen.Id(n.desc), jen.Id("handler"), jen.Id("stores"), jen.Id("journals"))),
	)
	jf.Line()

	store := c.opts.GetStore()
	if store == gcv1.StoreKind_STORE_KIND_UNSPECIFIED {
		store = gcv1.StoreKind_STORE_KIND_ROCKSDB
	}
	desc := []jen.Code{
		jen.Id("Name").Op(":").Lit(full),
		jen.Id("Store").Op(":").Add(fc.q(pathGCv1, "StoreKind_"+store.String())),
	}
	var defaults []jen.Code
	d := c.opts.GetShardDefaults()
	if v := d.GetMinTxnDuration().AsDuration(); v != 0 {
		defaults = append(defaults, jen.Id("MinTxnDuration").Op(":").Add(durationExpr(fc, v)))
	}
	if v := d.GetMaxTxnDuration().AsDuration(); v != 0 {
		defaults = append(defaults, jen.Id("MaxTxnDuration").Op(":").Add(durationExpr(fc, v)))
	}
	if v := d.GetHotStandbys(); v != 0 {
		defaults = append(defaults, jen.Id("HotStandbys").Op(":").Lit(int(v)))
	}
	if len(defaults) != 0 {
		desc = append(desc, jen.Id("ShardDefaults").Op(":").Add(fc.q(pathPC, "ShardSpec")).Values(defaults...))
	}
	var inputs []jen.Code
	for _, h := range c.handlers {
		in := fc.q(pathRuntime, "Handle").Call(jen.Lit(h.journal.messageType), jen.Lit(h.journal.contentType),
			jen.Lit(string(h.method.Desc.Name())), jen.Id(n.handler).Dot(h.method.GoName))
		if h.onFailure != nil {
			in = in.Dot("OnFailure").Call(failurePolicyExpr(fc, h.onFailure))
		}
		inputs = append(inputs, withReadsAhead(fc, c, h, in))
	}
	desc = append(desc, jen.Id("Inputs").Op(":").Index().Add(fc.q(pathRuntime, "Input")).Types(jen.Id(n.handler), txnP.Clone()).Custom(multiLine, inputs...))
	if len(c.publishes) != 0 {
		var outputs []jen.Code
		for _, p := range c.publishes {
			outputs = append(outputs, fc.q(pathRuntime, "Publishes").Types(fc.ident(p.journal.msg.GoIdent)).Call(jen.Lit(p.selector)))
		}
		desc = append(desc, jen.Id("Outputs").Op(":").Index().Add(fc.q(pathRuntime, "Output")).Custom(multiLine, outputs...))
	}
	if len(c.tables) != 0 || len(c.timers) != 0 {
		var tables []jen.Code
		for _, t := range c.tables {
			tables = append(tables, jen.Id(t.msg.GoIdent.GoName).Op(":").Add(fc.q(string(t.msg.GoIdent.GoImportPath), tableNamesOf(t).ctor)).Call(jen.Id("kv")))
		}
		for _, t := range c.timers {
			tn := tableNamesOf(t)
			tables = append(tables, jen.Id(tn.table).Op(":").Add(fc.q(string(t.msg.GoIdent.GoImportPath), tn.ctor)).Call(jen.Id("kv")))
		}
		desc = append(desc, jen.Id("NewTxn").Op(":").Func().Params(jen.Id("kv").Add(fc.q(pathRuntime, "KV"))).Add(txnP.Clone()).Block(
			jen.Return(jen.Op("&").Id(n.txn).Custom(multiLine, tables...)),
		))
	}
	desc = append(desc, jen.Id("FinalizeTxn").Op(":").Id(n.handler).Dot("FinalizeTxn"))
	if len(c.tables) != 0 || len(c.timers) != 0 {
		desc = append(desc, jen.Id("Tables").Op(":").Index().Add(fc.q(pathRuntime, "TableOwnership")).Custom(multiLine, genOwners(fc, c)...))
	}
	if c.onFailure != nil {
		desc = append(desc, jen.Id("OnFailure").Op(":").Add(failurePolicyExpr(fc, c.onFailure)))
	}
	var expiring []jen.Code
	for _, t := range c.tables {
		if t.ttl == 0 {
			continue
		}
		row := jen.Op("*").Add(fc.ident(t.msg.GoIdent))
		method := expiryMethod(t)
		schema := fc.q(string(t.msg.GoIdent.GoImportPath), tableNamesOf(t).ctor).Call(jen.Nil()).Dot("Schema").Call()
		// The handler's method is optional.
		onExpire := jen.Func().Params(jen.Id("h").Id(n.handler), jen.Id("tx").Add(txnP.Clone()), jen.Id("row").Add(row.Clone())).Error().Block(
			jen.If(jen.List(jen.Id("e"), jen.Id("ok")).Op(":=").Id("any").Call(jen.Id("h")).Assert(jen.Interface(jen.Id(method).Params(txnP.Clone(), row.Clone()).Error())), jen.Id("ok")).Block(
				jen.Return(jen.Id("e").Dot(method).Call(jen.Id("tx"), jen.Id("row"))),
			),
			jen.Return(jen.Nil()),
		)
		expiring = append(expiring, fc.q(pathTable, "Expires").Call(schema, onExpire))
	}
	var timers []jen.Code
	for _, h := range c.timerHandlers {
		schema := fc.q(string(h.timer.msg.GoIdent.GoImportPath), tableNamesOf(h.timer).ctor).Call(jen.Nil()).Dot("Schema").Call()
		timers = append(timers, fc.q(pathTable, "Fires").Call(schema, jen.Id(n.handler).Dot(h.method.GoName)))
	}
	if len(timers) != 0 {
		desc = append(desc, jen.Id("Timers").Op(":").Index().Add(fc.q(pathRuntime, "Timing")).Types(jen.Id(n.handler), txnP.Clone()).Custom(multiLine, timers...))
	}
	if len(expiring) != 0 {
		desc = append(desc, jen.Id("Expiring").Op(":").Index().Add(fc.q(pathRuntime, "Expiring")).Types(jen.Id(n.handler), txnP.Clone()).Custom(multiLine, expiring...))
	}
	fc.doc("%s describes consumer %s to runtime.NewAdapter.", n.desc, full)
	jf.Var().Id(n.desc).Op("=").Op("&").Add(fc.q(pathRuntime, "Consumer")).Types(jen.Id(n.handler), txnP.Clone()).Custom(multiLine, desc...)
	jf.Line()
}

// failurePolicyExpr returns a runtime.FailurePolicy literal of p, with the
// fields it sets: the runtime holds the defaults.
func failurePolicyExpr(fc *fileCtx, p *failurePolicy) *jen.Statement {
	var fields []jen.Code
	if p.retries != 0 {
		fields = append(fields, jen.Id("Retries").Op(":").Lit(int(p.retries)))
	}
	if p.backoff != 0 {
		fields = append(fields, jen.Id("Backoff").Op(":").Add(durationExpr(fc, p.backoff)))
	}
	if p.maxBackoff != 0 {
		fields = append(fields, jen.Id("MaxBackoff").Op(":").Add(durationExpr(fc, p.maxBackoff)))
	}
	if p.deadLetter {
		fields = append(fields, jen.Id("DeadLetter").Op(":").True())
	}
	return fc.q(pathRuntime, "FailurePolicy").Values(fields...)
}
