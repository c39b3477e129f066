package gengc

import (
	"strings"

	"github.com/dave/jennifer/jen"
	"google.golang.org/protobuf/compiler/protogen"

	gcv1 "github.com/gazconsumer/gazconsumer/proto/gazconsumer/v1"
)

// consumerNames are the package-level names generated for c.
func consumerNames(c *consumer) []string {
	s := c.svc.GoName
	return []string{s + "Handler", s + "Txn", s + "Application", "New" + s + "Application"}
}

// txnReserved are the names of fields and methods of a generated Txn.
var txnReserved = map[string]bool{"Shard": true, "Store": true, "Envelope": true}

// comments returns the leading comments of a declaration as a comment
// block, or fallback if it has none.
func comments(jf *jen.File, cs protogen.CommentSet, fallback string) {
	text := strings.TrimSpace(string(cs.Leading))
	if text == "" {
		text = fallback
	}
	for _, line := range strings.Split(text, "\n") {
		jf.Comment(strings.TrimPrefix(line, " "))
	}
}

// genConsumer generates the handler interface, the transaction type and the runtime.Application adapter of consumer c.
func genConsumer(jf *jen.File, c *consumer) {
	s := c.svc.GoName
	full := string(c.svc.Desc.FullName())
	handlerT, txnT, appT := s+"Handler", s+"Txn", s+"Application"
	txnP := jen.Op("*").Id(txnT)

	// Handler interface: one method per consumed message type, and
	// FinalizeTxn. Nothing generated supplies them, so that a handler type
	// missing one (a forgotten rpc, or one added to the .proto since) is a
	// compile error naming the method, not a shard failing at run time.
	comments(jf, c.svc.Comments, handlerT+" handles the messages consumed by "+full+".")
	jf.Comment("")
	jf.Comment("It lists a method for every rpc of the service: an rpc added to the .proto")
	jf.Commentf("breaks the build of a handler until it implements the rpc. Optional hooks")
	jf.Commentf("are detected on the handler: runtime.BeginFinisher.")
	var methods []jen.Code
	for _, h := range c.handlers {
		in := h.method.Input
		for _, line := range strings.Split(commentText(h.method.Comments, h.method.GoName+" handles a "+string(in.Desc.FullName())+" read by the shard."), "\n") {
			methods = append(methods, jen.Comment(strings.TrimPrefix(line, " ")))
		}
		methods = append(methods,
			jen.Id(h.method.GoName).Params(jen.Id("tx").Add(txnP.Clone()), jen.Id("msg").Op("*").Qual(string(in.GoIdent.GoImportPath), in.GoIdent.GoName)).Error(),
		)
	}
	methods = append(methods,
		jen.Comment("FinalizeTxn is called as the transaction ends: by its return, every"),
		jen.Comment("in-memory effect of the transaction must be written to tables and every"),
		jen.Comment("message to publish must be published."),
		jen.Id("FinalizeTxn").Params(jen.Id("tx").Add(txnP.Clone())).Error(),
	)
	jf.Type().Id(handlerT).Interface(methods...)
	jf.Line()

	// Transaction.
	jf.Commentf("%s is the transaction within which a %s handler runs. A shard's", txnT, handlerT)
	jf.Comment("handlers share one for the whole transaction, set anew for each call: a handler")
	jf.Comment("may not keep it past its return.")
	fields := []jen.Code{
		jen.Comment("Shard being consumed."),
		jen.Id("Shard").Qual(pathRuntime, "Shard"),
		jen.Comment("Store of the shard."),
		jen.Id("Store").Qual(pathRuntime, "Store"),
		jen.Comment("Envelope of the message being handled; zero-valued in FinalizeTxn."),
		jen.Id("Envelope").Qual(pathMessage, "Envelope"),
	}
	for _, t := range c.tables {
		fields = append(fields,
			jen.Commentf("%s is table %q.", t.msg.GoIdent.GoName, t.name),
			jen.Id(t.msg.GoIdent.GoName).Qual(string(t.msg.GoIdent.GoImportPath), t.msg.GoIdent.GoName+"Table"))
	}
	fields = append(fields,
		jen.Line(),
		jen.Id("pub").Op("*").Qual(pathMessage, "Publisher"),
		jen.Id("app").Op("*").Id(appT),
	)
	jf.Type().Id(txnT).Struct(fields...)
	jf.Line()
	genPublishMethods(jf, c, txnT)

	// Application.
	jf.Commentf("%s runs a %s as a runtime.Application.", appT, handlerT)
	appFields := []jen.Code{
		jen.Id("handler").Id(handlerT),
		jen.Id("stores").Qual(pathRuntime, "StoreOpener"),
		jen.Id("txns").Qual(pathSync, "Map").Comment("Of each runtime.Store, its *" + txnT + ", from BeginTxn to FinishTxn."),
	}
	for _, p := range c.publishes {
		appFields = append(appFields, jen.Id(mappingField(p)).Qual(pathMessage, "MappingFunc"))
	}
	jf.Type().Id(appT).Struct(appFields...)
	jf.Line()
	jf.Var().Id("_").Qual(pathRuntime, "Application").Op("=").Parens(jen.Op("*").Id(appT)).Parens(jen.Nil())
	jf.Line()

	jf.Commentf("New%s returns an Application running handler, whose store is opened", appT)
	jf.Comment("by stores and whose published messages are routed among the journals listed")
	jf.Comment("by journals.")
	ctor := []jen.Code{
		jen.Id("a").Op(":=").Op("&").Id(appT).Values(jen.Dict{jen.Id("handler"): jen.Id("handler"), jen.Id("stores"): jen.Id("stores")}),
	}
	ctor = append(ctor, mappingInit(c)...)
	ctor = append(ctor, jen.Return(jen.Id("a"), jen.Nil()))
	jf.Func().Id("New"+appT).Params(
		jen.Id("handler").Id(handlerT), jen.Id("stores").Qual(pathRuntime, "StoreOpener"), jen.Id("journals").Qual(pathRuntime, "PartitionLister"),
	).Params(jen.Op("*").Id(appT), jen.Error()).Block(ctor...)
	jf.Line()

	storeKind := c.opts.GetStore()
	if storeKind == gcv1.StoreKind_STORE_KIND_UNSPECIFIED {
		storeKind = gcv1.StoreKind_STORE_KIND_ROCKSDB
	}
	jf.Comment("StoreKind returns the kind of store the consumer is annotated with.")
	jf.Func().Params(jen.Op("*").Id(appT)).Id("StoreKind").Params().Qual(pathGCv1, "StoreKind").Block(
		jen.Return(jen.Qual(pathGCv1, "StoreKind_"+storeKind.String())),
	)
	jf.Line()

	d := c.opts.GetShardDefaults()
	jf.Comment("ShardDefaults returns a ShardSpec holding the shard defaults the consumer is")
	jf.Comment("annotated with. The service completes the specs applied through its Shard API")
	jf.Comment("with them (runtime.ShardDefaulter).")
	jf.Func().Params(jen.Op("*").Id(appT)).Id("ShardDefaults").Params().Qual(pathPC, "ShardSpec").Block(
		jen.Return(jen.Qual(pathPC, "ShardSpec").Values(jen.Dict{
			jen.Id("MinTxnDuration"): jen.Qual(pathTime, "Duration").Call(jen.Lit(int(d.GetMinTxnDuration().AsDuration()))),
			jen.Id("MaxTxnDuration"): jen.Qual(pathTime, "Duration").Call(jen.Lit(int(d.GetMaxTxnDuration().AsDuration()))),
			jen.Id("HotStandbys"):    jen.Lit(int(d.GetHotStandbys())),
		})),
	)
	jf.Line()

	jf.Comment("NewStore opens the shard's store.")
	newStore := []jen.Code{
		jen.List(jen.Id("store"), jen.Err()).Op(":=").Id("a").Dot("stores").Dot("OpenStore").Call(jen.Id("shard"), jen.Id("rec")),
		jen.If(jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Nil(), jen.Qual(pathFmt, "Errorf").Call(jen.Lit("consumer "+full+": %w"), jen.Err())),
		),
	}
	if len(c.tables) != 0 {
		newStore = append(newStore, jen.If(jen.List(jen.Id("_"), jen.Id("ok")).Op(":=").Id("store").Assert(jen.Qual(pathRuntime, "KVStore")), jen.Op("!").Id("ok")).Block(
			jen.Id("store").Dot("Destroy").Call(),
			jen.Return(jen.Nil(), jen.Qual(pathFmt, "Errorf").Call(jen.Lit("consumer "+full+": store %T is not a runtime.KVStore, which its tables need"), jen.Id("store"))),
		))
	}
	newStore = append(newStore, jen.Return(jen.Id("store"), jen.Nil()))
	jf.Func().Params(jen.Id("a").Op("*").Id(appT)).Id("NewStore").Params(jen.Id("shard").Qual(pathRuntime, "Shard"), jen.Id("rec").Qual(pathRuntime, "Recorder")).
		Params(jen.Qual(pathRuntime, "Store"), jen.Error()).Block(newStore...)
	jf.Line()

	var journals []*journalMsg
	for _, h := range c.handlers {
		journals = append(journals, h.journal)
	}
	jf.Comment("NewMessage returns a new message of the type named by the journal's")
	jf.Comment("\"app.gazette.dev/message-type\" label, among those the consumer handles.")
	jf.Func().Params(jen.Op("*").Id(appT)).Id("NewMessage").Params(jen.Id("spec").Op("*").Qual(pathPB, "JournalSpec")).
		Params(jen.Qual(pathMessage, "Message"), jen.Error()).Block(newMessageBody(journals, "consumer "+full)...)
	jf.Line()

	// newTxn.
	newTxn := []jen.Code{
		jen.Id("tx").Op(":=").Op("&").Id(txnT).Values(jen.Dict{
			jen.Id("Shard"): jen.Id("shard"), jen.Id("Store"): jen.Id("store"), jen.Id("Envelope"): jen.Id("env"),
			jen.Id("pub"): jen.Id("pub"), jen.Id("app"): jen.Id("a"),
		}),
	}
	if len(c.tables) != 0 {
		newTxn = append(newTxn,
			jen.List(jen.Id("kvs"), jen.Id("ok")).Op(":=").Id("store").Assert(jen.Qual(pathRuntime, "KVStore")),
			jen.If(jen.Op("!").Id("ok")).Block(
				jen.Return(jen.Nil(), jen.Qual(pathFmt, "Errorf").Call(jen.Lit("consumer "+full+": store %T is not a runtime.KVStore, which its tables need"), jen.Id("store"))),
			),
			jen.Id("kv").Op(":=").Id("kvs").Dot("KV").Call(),
		)
		for _, t := range c.tables {
			newTxn = append(newTxn, jen.Id("tx").Dot(t.msg.GoIdent.GoName).Op("=").Qual(string(t.msg.GoIdent.GoImportPath), "New"+t.msg.GoIdent.GoName+"Table").Call(jen.Id("kv")))
		}
	}
	newTxn = append(newTxn, jen.Return(jen.Id("tx"), jen.Nil()))
	jf.Comment("newTxn returns a new transaction of store.")
	jf.Func().Params(jen.Id("a").Op("*").Id(appT)).Id("newTxn").Params(
		jen.Id("shard").Qual(pathRuntime, "Shard"), jen.Id("store").Qual(pathRuntime, "Store"),
		jen.Id("env").Qual(pathMessage, "Envelope"), jen.Id("pub").Op("*").Qual(pathMessage, "Publisher"),
	).Params(jen.Op("*").Id(txnT), jen.Error()).Block(newTxn...)
	jf.Line()

	jf.Comment("txnOf returns the transaction of store, which BeginTxn began, set for a")
	jf.Comment("handler call on env.")
	jf.Func().Params(jen.Id("a").Op("*").Id(appT)).Id("txnOf").Params(
		jen.Id("shard").Qual(pathRuntime, "Shard"), jen.Id("store").Qual(pathRuntime, "Store"),
		jen.Id("env").Qual(pathMessage, "Envelope"), jen.Id("pub").Op("*").Qual(pathMessage, "Publisher"),
	).Params(jen.Op("*").Id(txnT), jen.Error()).Block(
		jen.If(jen.List(jen.Id("v"), jen.Id("ok")).Op(":=").Id("a").Dot("txns").Dot("Load").Call(jen.Id("store")), jen.Id("ok")).Block(
			jen.Id("tx").Op(":=").Id("v").Assert(jen.Op("*").Id(txnT)),
			jen.List(jen.Id("tx").Dot("Envelope"), jen.Id("tx").Dot("pub")).Op("=").List(jen.Id("env"), jen.Id("pub")),
			jen.Return(jen.Id("tx"), jen.Nil()),
		),
		jen.Comment("Called outside of BeginTxn and FinishTxn, as a test may."),
		jen.Return(jen.Id("a").Dot("newTxn").Call(jen.Id("shard"), jen.Id("store"), jen.Id("env"), jen.Id("pub"))),
	)
	jf.Line()

	// ConsumeMessage.
	var cases []jen.Code
	for _, h := range c.handlers {
		in := h.method.Input
		cases = append(cases, jen.Case(jen.Op("*").Qual(string(in.GoIdent.GoImportPath), in.GoIdent.GoName)).Block(
			jen.If(jen.Err().Op(":=").Id("a").Dot("handler").Dot(h.method.GoName).Call(jen.Id("tx"), jen.Id("msg")), jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Qual(pathFmt, "Errorf").Call(jen.Lit(full+"."+string(h.method.Desc.Name())+": %w"), jen.Err())),
			),
			jen.Return(jen.Nil()),
		))
	}
	cases = append(cases, jen.Default().Block(
		jen.Return(jen.Qual(pathFmt, "Errorf").Call(jen.Lit(full+" has no handler for %T"), jen.Id("env").Dot("Message"))),
	))
	jf.Comment("ConsumeMessage hands the message of env to its handler.")
	jf.Func().Params(jen.Id("a").Op("*").Id(appT)).Id("ConsumeMessage").Params(
		jen.Id("shard").Qual(pathRuntime, "Shard"), jen.Id("store").Qual(pathRuntime, "Store"),
		jen.Id("env").Qual(pathMessage, "Envelope"), jen.Id("pub").Op("*").Qual(pathMessage, "Publisher"),
	).Error().Block(
		jen.List(jen.Id("tx"), jen.Err()).Op(":=").Id("a").Dot("txnOf").Call(jen.Id("shard"), jen.Id("store"), jen.Id("env"), jen.Id("pub")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
		jen.Switch(jen.Id("msg").Op(":=").Id("env").Dot("Message").Assert(jen.Type())).Block(cases...),
	)
	jf.Line()

	jf.Var().Id("_").Qual(pathRuntime, "BeginFinisher").Op("=").Parens(jen.Op("*").Id(appT)).Parens(jen.Nil())
	jf.Line()
	jf.Comment("BeginTxn begins the transaction of store, in which handlers are called, and")
	jf.Comment("calls the handler's BeginTxn, if the handler is a runtime.BeginFinisher.")
	jf.Func().Params(jen.Id("a").Op("*").Id(appT)).Id("BeginTxn").Params(
		jen.Id("shard").Qual(pathRuntime, "Shard"), jen.Id("store").Qual(pathRuntime, "Store"),
	).Error().Block(
		jen.List(jen.Id("tx"), jen.Err()).Op(":=").Id("a").Dot("newTxn").Call(jen.Id("shard"), jen.Id("store"), jen.Qual(pathMessage, "Envelope").Values(), jen.Nil()),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
		jen.Id("a").Dot("txns").Dot("Store").Call(jen.Id("store"), jen.Id("tx")),
		jen.If(jen.List(jen.Id("bf"), jen.Id("ok")).Op(":=").Id("a").Dot("handler").Assert(jen.Qual(pathRuntime, "BeginFinisher")), jen.Id("ok")).Block(
			jen.Return(jen.Id("bf").Dot("BeginTxn").Call(jen.Id("shard"), jen.Id("store"))),
		),
		jen.Return(jen.Nil()),
	)
	jf.Line()
	jf.Comment("FinishTxn ends the transaction of store, and calls the handler's FinishTxn,")
	jf.Comment("if the handler is a runtime.BeginFinisher.")
	jf.Func().Params(jen.Id("a").Op("*").Id(appT)).Id("FinishTxn").Params(
		jen.Id("shard").Qual(pathRuntime, "Shard"), jen.Id("store").Qual(pathRuntime, "Store"), jen.Id("err").Error(),
	).Error().Block(
		jen.Id("a").Dot("txns").Dot("Delete").Call(jen.Id("store")),
		jen.If(jen.List(jen.Id("bf"), jen.Id("ok")).Op(":=").Id("a").Dot("handler").Assert(jen.Qual(pathRuntime, "BeginFinisher")), jen.Id("ok")).Block(
			jen.Return(jen.Id("bf").Dot("FinishTxn").Call(jen.Id("shard"), jen.Id("store"), jen.Id("err"))),
		),
		jen.Return(jen.Nil()),
	)
	jf.Line()

	jf.Comment("FinalizeTxn calls the handler's FinalizeTxn, which flushes what the")
	jf.Comment("transaction buffered.")
	jf.Func().Params(jen.Id("a").Op("*").Id(appT)).Id("FinalizeTxn").Params(
		jen.Id("shard").Qual(pathRuntime, "Shard"), jen.Id("store").Qual(pathRuntime, "Store"), jen.Id("pub").Op("*").Qual(pathMessage, "Publisher"),
	).Error().Block(
		jen.List(jen.Id("tx"), jen.Err()).Op(":=").Id("a").Dot("txnOf").Call(jen.Id("shard"), jen.Id("store"), jen.Qual(pathMessage, "Envelope").Values(), jen.Id("pub")),
		jen.If(jen.Err().Op("!=").Nil()).Block(jen.Return(jen.Err())),
		jen.If(jen.Err().Op(":=").Id("a").Dot("handler").Dot("FinalizeTxn").Call(jen.Id("tx")), jen.Err().Op("!=").Nil()).Block(
			jen.Return(jen.Qual(pathFmt, "Errorf").Call(jen.Lit(full+": %w"), jen.Err())),
		),
		jen.Return(jen.Nil()),
	)
	jf.Line()
}

// commentText returns the leading comments cs, or fallback if there are none.
func commentText(cs protogen.CommentSet, fallback string) string {
	if t := strings.TrimSpace(string(cs.Leading)); t != "" {
		return t
	}
	return fallback
}
