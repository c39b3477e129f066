package source

import (
	"os"
	"testing"

	"github.com/gazconsumer/gazconsumer/devstack/devstacktest"
)

// testStack is the one stack of the test process: each test works under
// names of its own on it.
var testStack *devstacktest.Stack

func TestMain(m *testing.M) { os.Exit(devstacktest.Run(m, "", &testStack)) }
