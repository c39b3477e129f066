package gengc

import (
	"fmt"

	"github.com/dave/jennifer/jen"
	"google.golang.org/protobuf/compiler/protogen"
)

// HarnessFile is the name of the file of a consumer's test harness, in its
// package.
const HarnessFile = "harness" + FileSuffix

// genHarness returns the file of the test harness of consumer c of fm,
// whose names are h.
func genHarness(md *model, fm *fileModel, c *consumer, h *harnessNames) *fileCtx {
	full := string(c.svc.Desc.FullName())
	fc := newFileCtx(md, string(h.path), h.pkg, h.scope, harnessLocals)
	jf := fc.jf
	jf.HeaderComment("source: " + fm.file.Desc.Path())
	for _, line := range wrap(fmt.Sprintf("Package %s is the test harness of consumer %s: it runs the consumer's handler in the runtime's transactions, on an in-memory store and in-memory journals (see package runtime/consumertest), and feeds and reads the consumer's messages and tables, typed. Only tests import it.", h.pkg, full)) {
		jf.PackageComment(line)
	}

	msgType := func(m *protogen.Message) *jen.Statement { return fc.ident(m.GoIdent) }
	keyType := func(t *table) *jen.Statement {
		return fc.q(string(t.msg.GoIdent.GoImportPath), tableNamesOf(t).key)
	}

	fc.doc("Harness runs the handler of consumer %s in a shard of its own, in memory: feed it messages with the methods named for their types, run transactions with Commit (or lose one with Crash), and read what they committed through its tables and the messages it published.", full)
	fields := []jen.Code{jen.Op("*").Add(fc.q(pathConsumertest, "Harness"))}
	for i, t := range c.tables {
		fields = append(fields,
			jen.Commentf("%s is table %q, as last committed.", h.tables[i], t.name),
			jen.Id(h.tables[i]).Op("*").Add(fc.q(pathConsumertest, "Table")).Types(keyType(t), jen.Op("*").Add(msgType(t.msg))))
	}
	if len(c.publishes) != 0 {
		fields = append(fields,
			jen.Comment("Published holds the messages the consumer published, as its readers read"),
			jen.Comment("them: committed."),
			jen.Id("Published").Id("Published"))
	}
	jf.Type().Id("Harness").Struct(fields...)
	jf.Line()

	if len(c.publishes) != 0 {
		fc.doc("Published are the messages consumer %s published and committed, by type.", full)
		var pubFields []jen.Code
		for _, p := range c.publishes {
			pubFields = append(pubFields,
				jen.Commentf("%s are the %s messages published.", p.journal.msg.GoIdent.GoName, p.journal.msg.Desc.FullName()),
				jen.Id(p.journal.msg.GoIdent.GoName).Op("*").Add(fc.q(pathConsumertest, "Published")).Types(jen.Op("*").Add(msgType(p.journal.msg))))
		}
		jf.Type().Id("Published").Struct(pubFields...)
		jf.Line()
	}

	fc.doc("Producer publishes messages that consumer %s reads, within transactions of its own, which the consumer reads once the producer commits them: see consumertest.Producer.", full)
	jf.Type().Id("Producer").Struct(jen.Op("*").Add(fc.q(pathConsumertest, "Producer")))
	jf.Line()

	var inputs []jen.Code
	for _, hd := range c.handlers {
		inputs = append(inputs, fc.q(pathConsumertest, "InputOf").Types(msgType(hd.journal.msg)).
			Call(jen.Lit(hd.journal.messageType), jen.Lit(hd.journal.contentType)))
	}
	consumer := []jen.Code{
		jen.Id("Name").Op(":").Lit(full),
		jen.Id("NewApplication").Op(":").Func().Params(jen.Id("stores").Add(fc.q(pathRuntime, "StoreOpener")), jen.Id("journals").Add(fc.q(pathRuntime, "PartitionLister"))).
			Params(fc.q(pathRuntime, "Application"), jen.Error()).Block(
			jen.Return(fc.q(string(fm.file.GoImportPath), consumerNamesOf(c).ctor).Call(jen.Id("handler"), jen.Id("stores"), jen.Id("journals"))),
		),
		jen.Id("Inputs").Op(":").Index().Add(fc.q(pathConsumertest, "Input")).Custom(multiLine, inputs...),
	}
	if len(c.publishes) != 0 {
		var outputs []jen.Code
		for _, p := range c.publishes {
			j := p.journal
			outputs = append(outputs, fc.q(pathConsumertest, "OutputOf").Types(msgType(j.msg)).
				Call(jen.Lit(j.messageType), jen.Lit(j.contentType), jen.Lit(p.selector), jen.Lit(string(j.uuid.Desc.Name()))))
		}
		consumer = append(consumer, jen.Id("Outputs").Op(":").Index().Add(fc.q(pathConsumertest, "Output")).Custom(multiLine, outputs...))
	}
	body := []jen.Code{
		jen.Id("h").Op(":=").Op("&").Id("Harness").Values(jen.Id("Harness").Op(":").Add(fc.q(pathConsumertest, "New")).Call(
			jen.Id("t"), fc.q(pathConsumertest, "Consumer").Custom(multiLine, consumer...), jen.Id("opts").Op("..."))),
	}
	for i, t := range c.tables {
		body = append(body, jen.Id("h").Dot(h.tables[i]).Op("=").Add(fc.q(pathConsumertest, "NewTable")).Types(keyType(t), jen.Op("*").Add(msgType(t.msg))).Call(
			jen.Id("h").Dot("Harness"), fc.q(string(t.msg.GoIdent.GoImportPath), tableNamesOf(t).ctor)))
	}
	for _, p := range c.publishes {
		body = append(body, jen.Id("h").Dot("Published").Dot(p.journal.msg.GoIdent.GoName).Op("=").
			Add(fc.q(pathConsumertest, "NewPublished")).Types(jen.Op("*").Add(msgType(p.journal.msg))).Call(jen.Id("h").Dot("Harness")))
	}
	body = append(body, jen.Return(jen.Id("h")))
	jf.Comment("New returns a Harness running handler, with empty tables and journals: its")
	jf.Comment("shard reads every partition of the messages the consumer reads. Options of")
	jf.Comment("package consumertest tune it. The harness is stopped when t ends.")
	jf.Func().Id("New").Params(jen.Id("t").Add(fc.q(pathTesting, "TB")), jen.Id("handler").Add(fc.q(string(fm.file.GoImportPath), consumerNamesOf(c).handler)),
		jen.Id("opts").Op("...").Add(fc.q(pathConsumertest, "Option"))).Op("*").Id("Harness").Block(body...)
	jf.Line()

	appended := func() *jen.Statement { return fc.q(pathConsumertest, "Appended") }
	for i, hd := range c.handlers {
		m := hd.method.Input
		fc.doc("%s appends msg, committed, to its partition of the %s journals, for the next transaction to consume.", h.inputs[i], m.Desc.FullName())
		jf.Func().Params(jen.Id("h").Op("*").Id("Harness")).Id(h.inputs[i]).Params(jen.Id("msg").Op("*").Add(msgType(m))).Add(appended()).Block(
			jen.Return(jen.Id("h").Dot("Feed").Call(jen.Id("msg"))),
		)
		jf.Line()
	}
	jf.Comment("NewProducer returns a Producer with a producer ID of its own.")
	jf.Func().Params(jen.Id("h").Op("*").Id("Harness")).Id("NewProducer").Params().Id("Producer").Block(
		jen.Return(jen.Id("Producer").Values(jen.Id("h").Dot("Harness").Dot("NewProducer").Call())),
	)
	jf.Line()
	for i, hd := range c.handlers {
		m := hd.method.Input
		fc.doc("%s appends msg within the producer's transaction to its partition of the %s journals.", h.inputs[i], m.Desc.FullName())
		jf.Func().Params(jen.Id("p").Id("Producer")).Id(h.inputs[i]).Params(jen.Id("msg").Op("*").Add(msgType(m))).Add(appended()).Block(
			jen.Return(jen.Id("p").Dot("Publish").Call(jen.Id("msg"))),
		)
		jf.Line()
	}
	return fc
}
