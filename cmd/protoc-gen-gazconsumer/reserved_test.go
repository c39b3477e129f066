package main

import (
	"reflect"
	"slices"
	"testing"

	"github.com/gazconsumer/gazconsumer/cmd/protoc-gen-gazconsumer/internal/gengc"
	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/consumertest"
)

// members returns the exported fields and methods of struct type t and of
// a pointer to it, including those promoted from embedded fields, and the
// name of t itself (that of the field embedding it).
func members(t reflect.Type) []string {
	out := []string{t.Name()}
	for i := range reflect.PointerTo(t).NumMethod() {
		out = append(out, reflect.PointerTo(t).Method(i).Name)
	}
	for _, f := range reflect.VisibleFields(t) {
		if f.IsExported() {
			out = append(out, f.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// TestReservedNames checks that the names the generator reserves in the
// types embedding those of the runtime are theirs: every name a generated
// field or method must not take.
func TestReservedNames(t *testing.T) {
	for _, tc := range []struct {
		what     string
		reserved []string
		embedded reflect.Type
	}{
		{"…Txn", gengc.TxnReserved, reflect.TypeFor[runtime.Txn]()},
		{"Harness", gengc.HarnessReserved, reflect.TypeFor[consumertest.Harness]()},
		{"Producer", gengc.ProducerReserved, reflect.TypeFor[consumertest.Producer]()},
	} {
		for _, name := range members(tc.embedded) {
			if !slices.Contains(tc.reserved, name) {
				t.Errorf("generated %s types embed %v, whose %s is not reserved", tc.what, tc.embedded, name)
			}
		}
	}
}
