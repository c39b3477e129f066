package gengc

import (
	"github.com/dave/jennifer/jen"
)

// genNewMessage generates the package's NewMessage, covering journals.
func genNewMessage(jf *jen.File, journals []*journalMsg) {
	jf.Comment("NewMessage returns a new message of the journal message type named by the")
	jf.Comment("journal's \"app.gazette.dev/message-type\" label, among those of this package.")
	jf.Comment("It fails if the label is missing or names no such type, or if the journal's")
	jf.Comment("\"content-type\" label is not the framing the type is annotated with.")
	jf.Func().Id("NewMessage").Params(jen.Id("spec").Op("*").Qual(pathPB, "JournalSpec")).
		Params(jen.Qual(pathMessage, "Message"), jen.Error()).
		Block(newMessageBody(journals, "this package")...)
	jf.Line()
}

// newMessageBody returns statements choosing among journals by the labels
// of journal spec `spec`. what names the set of types in error messages.
func newMessageBody(journals []*journalMsg, what string) []jen.Code {
	var cases []jen.Code
	for _, j := range journals {
		cases = append(cases, jen.Case(jen.Lit(j.messageType)).Block(
			jen.List(jen.Id("msg"), jen.Id("framing")).Op("=").List(jen.New(jen.Qual(string(j.msg.GoIdent.GoImportPath), j.msg.GoIdent.GoName)), jen.Lit(j.contentType)),
		))
	}
	cases = append(cases,
		jen.Case(jen.Lit("")).Block(
			jen.Return(jen.Nil(), jen.Qual(pathFmt, "Errorf").Call(jen.Lit("journal %s has no label %s"), jen.Id("spec").Dot("Name"), jen.Qual(pathLabels, "MessageType"))),
		),
		jen.Default().Block(
			jen.Return(jen.Nil(), jen.Qual(pathFmt, "Errorf").Call(jen.Lit("journal %s: label %s=%q names no journal message of "+what),
				jen.Id("spec").Dot("Name"), jen.Qual(pathLabels, "MessageType"), jen.Id("mt"))),
		),
	)
	return []jen.Code{
		jen.Var().Id("msg").Qual(pathMessage, "Message"),
		jen.Var().Id("framing").String(),
		jen.Id("mt").Op(":=").Id("spec").Dot("LabelSet").Dot("ValueOf").Call(jen.Qual(pathLabels, "MessageType")),
		jen.Switch(jen.Id("mt")).Block(cases...),
		jen.If(jen.Id("ct").Op(":=").Id("spec").Dot("LabelSet").Dot("ValueOf").Call(jen.Qual(pathLabels, "ContentType")), jen.Id("ct").Op("!=").Id("framing")).Block(
			jen.Return(jen.Nil(), jen.Qual(pathFmt, "Errorf").Call(jen.Lit("journal %s: label %s=%q, but messages of type %s are framed as %q"),
				jen.Id("spec").Dot("Name"), jen.Qual(pathLabels, "ContentType"), jen.Id("ct"), jen.Id("mt"), jen.Id("framing"))),
		),
		jen.Return(jen.Id("msg"), jen.Nil()),
	}
}
