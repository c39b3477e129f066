package main

import (
	"github.com/spf13/cobra"
)

func newRootCmd() *cobra.Command {
	var root = &cobra.Command{
		Use:           "gazconsumer",
		Short:         "Typed, stateful, exactly-once consumers of Gazette journals",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newDevCmd(), newEtcdCmd(), newShardsCmd(), newBreakingCmd(), newRescaleCmd())
	root.AddCommand(newSpecsCmd())
	root.AddCommand(newConsoleCmd())
	return root
}
