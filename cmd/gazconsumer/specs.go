package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gazconsumer/gazconsumer/internal/protoload"
	"github.com/gazconsumer/gazconsumer/specgen"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"
)

type specsFlags struct {
	importPaths   []string
	descriptorSet string
	out           string
	upsert        bool
}

func newSpecsCmd() *cobra.Command {
	var f specsFlags
	var cmd = &cobra.Command{
		Use:   "specs [flags] (PATH... | --descriptor-set FILE)",
		Short: "Write the journal and shard specs that the annotations of .proto files describe",
		Long: `specs writes the specifications of the journals and shards that the
gazconsumer annotations of .proto files describe, in the YAML formats
` + "`gazctl journals apply` and `gazctl shards apply`" + ` take: the partition
journals of each journal message whose journal option has a family, and the
shards of each consumer whose option has shards, with their recovery logs.

PATHs are .proto files, or directories of them, found under the import paths
(-I; by default, the directories given, and those of the files given). The
well-known types and gazconsumer/v1/options.proto are built in. Or
--descriptor-set reads a FileDescriptorSet holding the files and their
imports (buf build -o FILE.binpb).

With --out DIR, it writes DIR/journals.yaml and DIR/NAME-shards.yaml for each
consumer service NAME (lower-cased); else it prints them to stdout, as YAML
documents one after the other.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSpecs(cmd.Context(), cmd.OutOrStdout(), f, args)
		},
	}
	cmd.Flags().StringArrayVarP(&f.importPaths, "proto-path", "I", nil, "directory in which to search for imports (repeatable)")
	cmd.Flags().StringVar(&f.descriptorSet, "descriptor-set", "", "read a FileDescriptorSet, with imports, rather than compile PATHs")
	cmd.Flags().StringVarP(&f.out, "out", "o", "", "directory to write the spec files to (default: stdout)")
	cmd.Flags().BoolVar(&f.upsert, "upsert", false, "give each journal and shard revision -1, which has gazctl create or update it, for specs applied again and again")
	return cmd
}

// loadProtos compiles the .proto files of paths (files or directories,
// under importPaths), or reads them from descriptorSet.
func loadProtos(ctx context.Context, importPaths []string, descriptorSet string, paths []string) ([]protoreflect.FileDescriptor, error) {
	switch {
	case descriptorSet != "" && len(paths) != 0:
		return nil, errors.New("give either PATHs or --descriptor-set, not both")
	case descriptorSet != "":
		var data, err = os.ReadFile(descriptorSet)
		if err != nil {
			return nil, err
		}
		files, err := specgen.ReadDescriptorSet(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", descriptorSet, err)
		}
		return files, nil
	case len(paths) == 0:
		return nil, errors.New("no .proto files or directories given (or --descriptor-set)")
	}
	var roots, names, err = protoFiles(importPaths, paths)
	if err != nil {
		return nil, err
	}
	return specgen.Compile(ctx, roots, names)
}

func runSpecs(ctx context.Context, stdout io.Writer, f specsFlags, args []string) error {
	var files, err = loadProtos(ctx, f.importPaths, f.descriptorSet, args)
	if err != nil {
		return err
	}

	out, err := specgen.Generate(files, specgen.Options{Command: specsCommand(f, args), Upsert: f.upsert})
	if err != nil {
		return err
	}
	if f.out == "" {
		for i, file := range out {
			if i != 0 {
				if _, err = io.WriteString(stdout, "---\n"); err != nil {
					return err
				}
			}
			if _, err = stdout.Write(file.Content); err != nil {
				return err
			}
		}
		return nil
	}
	if err = os.MkdirAll(f.out, 0o755); err != nil {
		return err
	}
	for _, file := range out {
		if err = os.WriteFile(filepath.Join(f.out, file.Name), file.Content, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// protoFiles returns the import paths, and the .proto files named by paths
// (files, or directories of them) relative to the first import path holding
// each. Without importPaths, those are the directories of paths, and of
// the files of paths.
func protoFiles(importPaths, paths []string) ([]string, []string, error) {
	var found []string
	for _, p := range paths {
		var err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			} else if !d.IsDir() && (path == p || strings.HasSuffix(path, ".proto")) {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	if len(found) == 0 {
		return nil, nil, fmt.Errorf("no .proto files in %s", strings.Join(paths, ", "))
	}
	importPaths, err := protoload.ImportRoots(importPaths, "", paths, "")
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var seen = map[string]bool{}
	for _, path := range found {
		var name, ok = protoload.ImportPath(importPaths, path)
		if !ok {
			return nil, nil, fmt.Errorf("%s is under none of the import paths (-I) %s", path, strings.Join(importPaths, ", "))
		} else if !seen[name] {
			seen[name] = true
			names = append(names, name)
		}
	}
	return importPaths, names, nil
}

// specsCommand is the command line that runs specs with f and args, as
// the generated files' headers name it.
func specsCommand(f specsFlags, args []string) string {
	var words = []string{"gazconsumer", "specs"}
	for _, p := range f.importPaths {
		words = append(words, "-I", p)
	}
	if f.descriptorSet != "" {
		words = append(words, "--descriptor-set", f.descriptorSet)
	}
	if f.upsert {
		words = append(words, "--upsert")
	}
	if f.out != "" {
		words = append(words, "--out", f.out)
	}
	return strings.Join(append(words, args...), " ")
}
