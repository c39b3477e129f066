// Package templates holds the text templates of files gazconsumer writes
// once for the user to edit, such as handler stubs, as opposed to generated
// files which are rewritten on every generation.
package templates

import (
	"embed"
	"text/template"
)

//go:embed *.tmpl
var files embed.FS

// Handlers is the template of a consumer's handler stubs. Its data is a
// HandlersData.
var Handlers = template.Must(template.New("handlers.go.tmpl").ParseFS(files, "handlers.go.tmpl"))

// Main is the template of a consumer's command, which serves the consumer
// with its handlers. Its data is a MainData.
var Main = template.Must(template.New("main.go.tmpl").ParseFS(files, "main.go.tmpl"))

// HandlersData is the data of the Handlers template.
type HandlersData struct {
	// Package is the Go package name of the scaffolded file.
	Package string
	// Source is the .proto file declaring the consumer.
	Source string
	// GenImport is the import path of the generated code, and GenName the
	// name it is imported as.
	GenImport, GenName string
	// Service is the Go name of the consumer service, and FullName its
	// protobuf name.
	Service, FullName string
	// Errors is the name the standard library's errors package is imported as.
	Errors string
	// Imports are the packages of consumed messages other than GenImport.
	Imports []Import
	// Handlers are the rpcs of the consumer.
	Handlers []HandlerData
	// Tables are the Go names of the transaction's table fields.
	Tables []string
	// Publishes are the names of the transaction's publish methods.
	Publishes []string
}

// HandlerData is one rpc of a consumer.
type HandlerData struct {
	// Method is the Go name of the handler method.
	Method string
	// Input is the Go type of the consumed message, qualified by its
	// package name (e.g. "acmev1.Order").
	Input string
	// Timer tells that the rpc handles the firings of timers of Input.
	Timer bool
}

// Import is an imported Go package.
type Import struct {
	// Name the package is imported as, and its import Path.
	Name, Path string
}

// MainData is the data of the Main template.
type MainData struct {
	// Command is the name of the command, and of the consumer application
	// (its default etcd prefix is /gazette/consumers/<Command>).
	Command string
	// Source is the .proto file declaring the consumer.
	Source string
	// Service is the Go name of the consumer service, and FullName its
	// protobuf name.
	Service, FullName string
	// Imports are the packages the command imports, besides the standard
	// library's. An Import's Name is empty where the package's own name
	// serves.
	Imports []Import
	// GenName, HandlersName, RuntimePkg, RunPkg and RocksPkg are the names
	// under which the command refers to the generated package, the
	// handlers' package and gazconsumer's runtime, runtime/runconsumer and
	// store/rocks packages.
	GenName, HandlersName, RuntimePkg, RunPkg, RocksPkg string
}
