package service

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
	"go.gazette.dev/core/broker/client"
)

// testStack is the one stack of the test process: each test works under
// names of its own on it.
var testStack *devstacktest.Stack

func TestMain(m *testing.M) {
	slog.SetLogLoggerLevel(devstacktest.LogLevel())
	var code = func() int {
		var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error
		if testStack, err = devstacktest.Start(ctx, ""); err != nil {
			panic(err)
		}
		defer testStack.Close()
		// Players read persisted fragments of recovery logs directly.
		defer client.InstallFileTransport(testStack.FragmentsRoot())()
		return m.Run()
	}()
	os.Exit(devstacktest.LeakChecked(code))
}
