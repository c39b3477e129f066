package gengc

import (
	"github.com/dave/jennifer/jen"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/types/gofeaturespb"
)

// Generated code reads and writes the fields of messages through the API
// protoc-gen-go generates for them: the open struct API (exported fields,
// getters), the hybrid API (both) or the opaque API (getters, setters, and
// Has and Clear methods of fields with presence).

// opaque reports whether f is accessed through the opaque API only.
func opaque(f *protogen.Field) bool {
	return f.Parent.APILevel == gofeaturespb.GoFeatures_API_OPAQUE
}

// methodOf returns the name of accessor method ("Get", "Set" or "Has") of f.
func methodOf(f *protogen.Field, method string) string {
	name, _ := f.MethodName(method)
	return name
}

// get returns the expression of the value of field f of x, by its getter:
// the field's zero value if it is not set.
func get(x jen.Code, f *protogen.Field) *jen.Statement {
	return jen.Add(x).Dot(methodOf(f, "Get")).Call()
}

// set returns the statement setting field f of x to v.
func set(x jen.Code, f *protogen.Field, v jen.Code) *jen.Statement {
	if opaque(f) {
		return jen.Add(x).Dot(methodOf(f, "Set")).Call(v)
	}
	return jen.Add(x).Dot(f.GoName).Op("=").Add(v)
}
