// Package testpb holds the messages of the tests of package runtime/query.
package testpb

//go:generate protoc --plugin=protoc-gen-go=../../../../.tools/bin/protoc-gen-go --go_out=. --go_opt=paths=source_relative test.proto
