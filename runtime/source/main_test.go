package source

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
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
		return m.Run()
	}()
	if code == 0 {
		if err := devstacktest.FindLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
