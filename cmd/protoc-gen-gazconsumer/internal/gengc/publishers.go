package gengc

import (
	"github.com/dave/jennifer/jen"
)

// genPartitionKey generates AppendPartitionKey of journal message j.
func genPartitionKey(jf *jen.File, j *journalMsg) {
	jf.Comment("AppendPartitionKey appends to b the order-preserving encoding of the")
	jf.Comment("message's partition key fields, which selects the partition journal it is")
	jf.Comment("published to.")
	var stmts []jen.Code
	for _, f := range j.partitionKey {
		stmts = append(stmts, jen.Id("b").Op("=").Add(appendKey(jen.Id("b"), f, jen.Id("x").Dot("Get"+f.GoName).Call(), false)))
	}
	stmts = append(stmts, jen.Return(jen.Id("b")))
	jf.Func().Params(jen.Id("x").Op("*").Id(j.msg.GoIdent.GoName)).Id("AppendPartitionKey").
		Params(jen.Id("b").Index().Byte()).Index().Byte().Block(stmts...)
	jf.Line()
}

// publishName is the name of the Txn method publishing p, and of the
// Application field holding its mapping.
func publishName(p publish) string { return "Publish" + p.journal.msg.GoIdent.GoName }

// mappingField is the Application field holding the MappingFunc of p.
func mappingField(p publish) string { return "map" + p.journal.msg.GoIdent.GoName }

// genPublishMethods generates a typed Publish method on the consumer's
// transaction for each message it publishes.
func genPublishMethods(jf *jen.File, c *consumer, txnT string) {
	for _, p := range c.publishes {
		msg := jen.Qual(string(p.journal.msg.GoIdent.GoImportPath), p.journal.msg.GoIdent.GoName)
		jf.Commentf("%s publishes msg within the transaction to the partition journal, among", publishName(p))
		jf.Commentf("those selected by %q, chosen by its partition key. Readers", p.selector)
		jf.Comment("see it once the transaction commits, exactly once.")
		jf.Func().Params(jen.Id("tx").Op("*").Id(txnT)).Id(publishName(p)).Params(jen.Id("msg").Op("*").Add(msg)).Error().Block(
			jen.If(jen.List(jen.Id("_"), jen.Err()).Op(":=").Id("tx").Dot("pub").Dot("PublishUncommitted").Call(
				jen.Id("tx").Dot("app").Dot(mappingField(p)), jen.Id("msg")), jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Qual(pathFmt, "Errorf").Call(jen.Lit("publishing "+string(p.journal.msg.Desc.FullName())+": %w"), jen.Err())),
			),
			jen.Return(jen.Nil()),
		)
		jf.Line()
	}
}

// mappingInit returns statements of the Application constructor setting up
// the MappingFunc of each published message, from PartitionLister `journals`.
func mappingInit(c *consumer) []jen.Code {
	var stmts []jen.Code
	for i, p := range c.publishes {
		op := "="
		if i == 0 {
			op = ":="
		}
		stmts = append(stmts,
			jen.List(jen.Id("sel"), jen.Err()).Op(op).Qual(pathPB, "ParseLabelSelector").Call(jen.Lit(p.selector)),
			jen.If(jen.Err().Op("!=").Nil()).Block(
				jen.Return(jen.Nil(), jen.Qual(pathFmt, "Errorf").Call(jen.Lit("partitions of "+string(p.journal.msg.Desc.FullName())+": %w"), jen.Err())),
			),
		)
		var mapping jen.Code
		if len(p.journal.partitionKey) == 0 {
			mapping = jen.Qual(pathMessage, "RandomMapping").Call(jen.Id("journals").Dot("Partitions").Call(jen.Id("sel")))
		} else {
			mapping = jen.Qual(pathMessage, "RendezvousMapping").Call(
				jen.Func().Params(jen.Id("m").Qual(pathMessage, "Mappable"), jen.Id("w").Qual(pathIO, "Writer")).Block(
					jen.List(jen.Id("_"), jen.Id("_")).Op("=").Id("w").Dot("Write").Call(
						jen.Id("m").Assert(jen.Op("*").Qual(string(p.journal.msg.GoIdent.GoImportPath), p.journal.msg.GoIdent.GoName)).Dot("AppendPartitionKey").Call(jen.Nil())),
				),
				jen.Id("journals").Dot("Partitions").Call(jen.Id("sel")),
			)
		}
		stmts = append(stmts, jen.Id("a").Dot(mappingField(p)).Op("=").Add(mapping))
	}
	return stmts
}
