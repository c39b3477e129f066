// Package fragstores registers the providers of the fragment stores Gazette
// supports (file://, s3://, gs://, azure://, azure-ad://), through Gazette's
// own store code, as its brokers and gazctl register them: a process that
// reads, persists or removes fragments registers them once.
package fragstores

import (
	"sync"

	"go.gazette.dev/core/broker/stores"
	"go.gazette.dev/core/broker/stores/azure"
	"go.gazette.dev/core/broker/stores/fs"
	"go.gazette.dev/core/broker/stores/gcs"
	"go.gazette.dev/core/broker/stores/s3"
)

var once sync.Once

// Register registers, once per process, the providers of every fragment
// store Gazette supports. fileRoot, if not empty, roots file:// stores
// (Gazette's fs.FileSystemStoreRoot): set it before the first use of a
// file:// store.
func Register(fileRoot string) {
	if fileRoot != "" {
		fs.FileSystemStoreRoot = fileRoot
	}
	once.Do(func() {
		stores.RegisterProviders(map[string]stores.Constructor{
			"azure":    azure.NewAccount,
			"azure-ad": azure.NewAD,
			"file":     fs.New,
			"gs":       gcs.New,
			"s3":       s3.New,
		})
	})
}
