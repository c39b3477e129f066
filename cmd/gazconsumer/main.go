// Command gazconsumer is the gazconsumer toolkit's command line: it runs the
// in-process development stack and inspects consumers.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var ctx, stop = signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "gazconsumer:", err)
		os.Exit(1)
	}
}
