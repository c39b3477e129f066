package service

import "github.com/gazconsumer/gazconsumer/devstack/devstacktest"

// SharedStack is the stack of the test process.
func SharedStack() *devstacktest.Stack { return testStack }
