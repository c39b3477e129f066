package gengc

import (
	"fmt"
	"path"
	"strings"

	"github.com/dave/jennifer/jen"
	"google.golang.org/protobuf/compiler/protogen"
)

// Import paths used by generated harnesses.
const (
	pathTesting      = "testing"
	pathConsumertest = "github.com/gazconsumer/gazconsumer/runtime/consumertest"
)

// HarnessFile is the name of the file of a consumer's test harness, in its
// package.
const HarnessFile = "harness" + FileSuffix

// harnessPackage returns the Go package name of the test harness of c: its
// lower-cased service name, then "test" (which no Go keyword ends with).
func harnessPackage(c *consumer) string { return strings.ToLower(c.svc.GoName) + "test" }

// harnessImportPath returns the import path of the test harness of c of fm:
// a sub-package of fm's package.
func harnessImportPath(fm *fileModel, c *consumer) protogen.GoImportPath {
	return protogen.GoImportPath(string(fm.file.GoImportPath) + "/" + harnessPackage(c))
}

// harnessFilename returns the name of the harness file of c of fm, beside
// the files generated for fm.
func harnessFilename(fm *fileModel, c *consumer) string {
	return path.Join(path.Dir(fm.file.GeneratedFilenamePrefix), harnessPackage(c), HarnessFile)
}

// checkHarnessPackages fails if the test harnesses of two consumers, or one
// and a Go package of the request, would share an import path.
func checkHarnessPackages(gen *protogen.Plugin, md *model) error {
	packages := map[protogen.GoImportPath]string{}
	for _, f := range gen.Files {
		packages[f.GoImportPath] = "Go package of " + f.Desc.Path()
	}
	for _, fm := range md.files {
		for _, c := range fm.consumers {
			p := harnessImportPath(fm, c)
			if other, ok := packages[p]; ok {
				return errorf(c.svc.Desc, "the test harness of consumer %s would be package %s, which is the %s", c.svc.Desc.Name(), p, other)
			}
			packages[p] = "test harness of consumer " + string(c.svc.Desc.FullName())
		}
	}
	return nil
}

// Names of the fields and methods of a generated Harness, of its embedded
// *consumertest.Harness, and of a generated Producer and its embedded
// *consumertest.Producer, which tables and feeds may not take.
var harnessReserved = []string{
	"Harness", "Published", "NewProducer", "Feed", "Redeliver", "Hold", "Release", "Commit", "TryCommit",
	"Crash", "Checkpoint", "State", "Spec", "Producer", "Publish",
}

// harnessNames returns the names of the Harness fields of the tables of c
// and of the feed methods of its inputs: their Go names, unless taken by the
// harness or by one another (two inputs of different packages may share a
// Go name), in which case a deterministic variant.
func harnessNames(c *consumer) (tables, inputs []string) {
	taken := map[string]bool{}
	for _, n := range harnessReserved {
		taken[n] = true
	}
	for _, t := range c.tables {
		name := t.msg.GoIdent.GoName
		if taken[name] {
			name = uniqueName(name+"Table", taken)
		}
		taken[name] = true
		tables = append(tables, name)
	}
	for _, h := range c.handlers {
		name := h.method.Input.GoIdent.GoName
		if taken[name] {
			name = uniqueName("Feed"+name, taken)
		}
		taken[name] = true
		inputs = append(inputs, name)
	}
	return tables, inputs
}

// genHarness returns the test harness file of consumer c of fm.
func genHarness(md *model, fm *fileModel, c *consumer) *jen.File {
	pkg := harnessPackage(c)
	full := string(c.svc.Desc.FullName())
	gen := jen.Qual(string(fm.file.GoImportPath), c.svc.GoName+"Handler")
	jf := jen.NewFilePathName(string(harnessImportPath(fm, c)), pkg)
	jf.HeaderComment(Header)
	jf.HeaderComment("source: " + fm.file.Desc.Path())
	for p, name := range md.pkgNames {
		jf.ImportAlias(string(p), string(name))
	}
	jf.PackageComment(fmt.Sprintf("Package %s is the test harness of consumer %s: it runs the", pkg, full))
	jf.PackageComment("consumer's handler in the runtime's transactions, on an in-memory store and")
	jf.PackageComment("in-memory journals (see package runtime/consumertest), and feeds and reads the")
	jf.PackageComment("consumer's messages and tables, typed. Only tests import it.")

	tableNames, inputNames := harnessNames(c)
	msgType := func(m *protogen.Message) *jen.Statement {
		return jen.Qual(string(m.GoIdent.GoImportPath), m.GoIdent.GoName)
	}
	keyType := func(t *table) *jen.Statement {
		return jen.Qual(string(t.msg.GoIdent.GoImportPath), t.msg.GoIdent.GoName+"Key")
	}
	tableType := func(t *table) *jen.Statement {
		return jen.Op("*").Qual(pathConsumertest, "Table").Types(keyType(t), jen.Op("*").Add(msgType(t.msg)))
	}
	publishedType := func(p publish) *jen.Statement {
		return jen.Op("*").Qual(pathConsumertest, "Published").Types(jen.Op("*").Add(msgType(p.journal.msg)))
	}

	// Harness.
	jf.Commentf("Harness runs the handler of consumer %s in a shard of its", full)
	jf.Comment("own, in memory: feed it messages with the methods named for their types, run")
	jf.Comment("transactions with Commit (or lose one with Crash), and read what they")
	jf.Comment("committed through its tables and the messages it published.")
	fields := []jen.Code{jen.Op("*").Qual(pathConsumertest, "Harness")}
	for i, t := range c.tables {
		fields = append(fields,
			jen.Commentf("%s is table %q, as last committed.", tableNames[i], t.name),
			jen.Id(tableNames[i]).Add(tableType(t)))
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
		jf.Commentf("Published are the messages consumer %s published and committed,", full)
		jf.Comment("by type.")
		var pubFields []jen.Code
		for _, p := range c.publishes {
			pubFields = append(pubFields,
				jen.Commentf("%s are the %s messages published.", p.journal.msg.GoIdent.GoName, p.journal.msg.Desc.FullName()),
				jen.Id(p.journal.msg.GoIdent.GoName).Add(publishedType(p)))
		}
		jf.Type().Id("Published").Struct(pubFields...)
		jf.Line()
	}

	jf.Commentf("Producer publishes messages that consumer %s reads, within", full)
	jf.Comment("transactions of its own, which the consumer reads once the producer commits")
	jf.Comment("them: see consumertest.Producer.")
	jf.Type().Id("Producer").Struct(jen.Op("*").Qual(pathConsumertest, "Producer"))
	jf.Line()

	// New.
	var inputs []jen.Code
	for _, h := range c.handlers {
		j := h.journal
		d := jen.Dict{
			jen.Id("New"):         jen.Func().Params().Qual(pathMessage, "Message").Block(jen.Return(jen.New(msgType(j.msg)))),
			jen.Id("MessageType"): jen.Lit(j.messageType),
			jen.Id("ContentType"): jen.Lit(j.contentType),
		}
		if len(j.partitionKey) != 0 {
			d[jen.Id("PartitionKey")] = jen.Func().Params(jen.Id("m").Qual(pathMessage, "Mappable"), jen.Id("w").Qual(pathIO, "Writer")).Block(
				jen.List(jen.Id("_"), jen.Id("_")).Op("=").Id("w").Dot("Write").Call(
					jen.Id("m").Assert(jen.Op("*").Add(msgType(j.msg))).Dot("AppendPartitionKey").Call(jen.Nil())),
			)
		}
		inputs = append(inputs, jen.Values(d))
	}
	var outputs []jen.Code
	for _, p := range c.publishes {
		j := p.journal
		outputs = append(outputs, jen.Values(jen.Dict{
			jen.Id("New"):         jen.Func().Params().Qual(pathMessage, "Message").Block(jen.Return(jen.New(msgType(j.msg)))),
			jen.Id("MessageType"): jen.Lit(j.messageType),
			jen.Id("ContentType"): jen.Lit(j.contentType),
			jen.Id("Selector"):    jen.Lit(p.selector),
			jen.Id("UUIDField"):   jen.Lit(string(j.uuid.Desc.Name())),
		}))
	}
	consumerDict := jen.Dict{
		jen.Id("Name"): jen.Lit(full),
		jen.Id("NewApplication"): jen.Func().Params(jen.Id("stores").Qual(pathRuntime, "StoreOpener"), jen.Id("journals").Qual(pathRuntime, "PartitionLister")).
			Params(jen.Qual(pathRuntime, "Application"), jen.Error()).Block(
			jen.Return(jen.Qual(string(fm.file.GoImportPath), "New"+c.svc.GoName+"Application").Call(jen.Id("handler"), jen.Id("stores"), jen.Id("journals"))),
		),
		jen.Id("Inputs"): jen.Index().Qual(pathConsumertest, "Input").Values(inputs...),
	}
	if len(outputs) != 0 {
		consumerDict[jen.Id("Outputs")] = jen.Index().Qual(pathConsumertest, "Output").Values(outputs...)
	}
	body := []jen.Code{
		jen.Id("h").Op(":=").Op("&").Id("Harness").Values(),
		jen.Id("h").Dot("Harness").Op("=").Qual(pathConsumertest, "New").Call(jen.Id("t"), jen.Qual(pathConsumertest, "Consumer").Values(consumerDict), jen.Id("opts").Op("...")),
	}
	for i, t := range c.tables {
		body = append(body, jen.Id("h").Dot(tableNames[i]).Op("=").Qual(pathConsumertest, "NewTable").Types(keyType(t), jen.Op("*").Add(msgType(t.msg))).Call(
			jen.Id("h").Dot("Harness"), jen.Qual(string(t.msg.GoIdent.GoImportPath), "New"+t.msg.GoIdent.GoName+"Table")))
	}
	for _, p := range c.publishes {
		body = append(body, jen.Id("h").Dot("Published").Dot(p.journal.msg.GoIdent.GoName).Op("=").
			Qual(pathConsumertest, "NewPublished").Types(jen.Op("*").Add(msgType(p.journal.msg))).Call(jen.Id("h").Dot("Harness")))
	}
	body = append(body, jen.Return(jen.Id("h")))
	jf.Comment("New returns a Harness running handler, with empty tables and journals: its")
	jf.Comment("shard reads every partition of the messages the consumer reads. Options of")
	jf.Comment("package consumertest tune it. The harness is stopped when t ends.")
	jf.Func().Id("New").Params(jen.Id("t").Qual(pathTesting, "TB"), jen.Id("handler").Add(gen), jen.Id("opts").Op("...").Qual(pathConsumertest, "Option")).
		Op("*").Id("Harness").Block(body...)
	jf.Line()

	// Feeds.
	appended := jen.Qual(pathConsumertest, "Appended")
	for i, h := range c.handlers {
		m := h.method.Input
		jf.Commentf("%s appends msg, committed, to its partition of the %s journals,", inputNames[i], m.Desc.FullName())
		jf.Comment("for the next transaction to consume.")
		jf.Func().Params(jen.Id("h").Op("*").Id("Harness")).Id(inputNames[i]).Params(jen.Id("msg").Op("*").Add(msgType(m))).Add(appended.Clone()).Block(
			jen.Return(jen.Id("h").Dot("Harness").Dot("Feed").Call(jen.Id("msg"))),
		)
		jf.Line()
	}
	jf.Comment("NewProducer returns a Producer with a producer ID of its own.")
	jf.Func().Params(jen.Id("h").Op("*").Id("Harness")).Id("NewProducer").Params().Id("Producer").Block(
		jen.Return(jen.Id("Producer").Values(jen.Id("h").Dot("Harness").Dot("NewProducer").Call())),
	)
	jf.Line()
	for i, h := range c.handlers {
		m := h.method.Input
		jf.Commentf("%s appends msg within the producer's transaction to its partition of the", inputNames[i])
		jf.Commentf("%s journals.", m.Desc.FullName())
		jf.Func().Params(jen.Id("p").Id("Producer")).Id(inputNames[i]).Params(jen.Id("msg").Op("*").Add(msgType(m))).Add(appended.Clone()).Block(
			jen.Return(jen.Id("p").Dot("Producer").Dot("Publish").Call(jen.Id("msg"))),
		)
		jf.Line()
	}
	return jf
}
