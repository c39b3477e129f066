package gengc

import (
	"slices"

	"github.com/dave/jennifer/jen"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// genOwners returns the elements of the Tables of consumer c's
// runtime.Consumer: for each of its tables, then each of its timers (whose
// schemas are tables'), the schema's Owned, of a function appending to b
// the partition key of the row of key k (its key fields of the partition
// key's fields, encoded as AppendPartitionKey encodes a message's), or
// Unowned, saying why it has none (see package internal/ownership).
func genOwners(fc *fileCtx, c *consumer) []jen.Code {
	var out []jen.Code
	owners := slices.Concat(c.owners, c.timerOwners)
	for i, t := range slices.Concat(c.tables, c.timers) {
		n := tableNamesOf(t)
		pkg := t.msg.GoIdent.GoImportPath
		// The schema is unexported: of a table of another package, it is
		// its table's.
		schema := jen.Id(n.schema)
		if string(pkg) != fc.path {
			schema = fc.q(string(pkg), n.ctor).Call(jen.Nil()).Dot("Schema").Call()
		}
		own := owners[i]
		if own.Unowned != nil {
			out = append(out, schema.Dot("Unowned").Call(jen.Lit(own.Unowned.Error())))
			continue
		}
		var body []jen.Code
		for j, idx := range own.Owner {
			k := t.key[idx]
			v := jen.Id("k").Dot(k.field.GoName)
			if k.presence() && k.field.Desc.Kind() != protoreflect.BytesKind && !isTimestamp(k.field.Desc) {
				v = fc.q(pathTable, "Value").Call(v) // Unset encodes as zero, as a getter returns it.
			}
			app := appendValue(fc, jen.Id("b"), k.field, v)
			if j == len(own.Owner)-1 {
				body = append(body, jen.Return(app))
			} else {
				body = append(body, jen.Id("b").Op("=").Add(app))
			}
		}
		out = append(out, schema.Dot("Owned").Call(
			jen.Func().Params(jen.Id("k").Op("*").Add(fc.q(string(pkg), n.key)), jen.Id("b").Index().Byte()).Index().Byte().Block(body...),
		))
	}
	return out
}
