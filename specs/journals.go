// Package specs reads journal specifications in the hierarchical YAML form
// that Gazette's `gazctl journals apply` takes, validates them with errors
// that name the file, the journal and the field, and applies them to brokers.
package specs

import (
	"context"
	"fmt"
	"os"

	"go.gazette.dev/core/broker/client"
	"go.gazette.dev/core/broker/journalspace"
	pb "go.gazette.dev/core/broker/protocol"
	"gopkg.in/yaml.v2"
)

// ParseJournals decodes a journal hierarchy from data, read from the file
// named name (used only in errors), and flattens it into an ApplyRequest.
// Unknown YAML fields, a malformed hierarchy and an invalid JournalSpec are
// errors naming name and, where known, the line, the journal and the field.
func ParseJournals(name string, data []byte) (*pb.ApplyRequest, error) {
	var tree journalspace.Node
	if err := yaml.UnmarshalStrict(data, &tree); err != nil {
		return nil, fmt.Errorf("%s: decoding journal specs: %w", name, err)
	}
	if err := tree.Validate(); err != nil {
		return nil, fmt.Errorf("%s: journal hierarchy: %w", name, err)
	}
	tree.PushDown()

	var req = new(pb.ApplyRequest)
	var err = tree.WalkTerminalNodes(func(node *journalspace.Node) error {
		var change = pb.ApplyRequest_Change{ExpectModRevision: node.Revision}
		if node.Delete != nil && *node.Delete {
			change.Delete = node.Spec.Name
		} else {
			var spec = node.Spec // Copy: the tree's nodes are reused by the walk.
			if err := spec.Validate(); err != nil {
				return fmt.Errorf("%s: journal %q: %w", name, spec.Name, err)
			}
			change.Upsert = &spec
		}
		req.Changes = append(req.Changes, change)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(req.Changes) == 0 {
		return nil, fmt.Errorf("%s: no journals to apply", name)
	}
	if err = req.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return req, nil
}

// ApplyJournals parses data (see ParseJournals) and applies the resulting
// changes through jc in one etcd transaction.
func ApplyJournals(ctx context.Context, jc pb.JournalClient, name string, data []byte) (*pb.ApplyResponse, error) {
	var req, err = ParseJournals(name, data)
	if err != nil {
		return nil, err
	}
	resp, err := client.ApplyJournals(ctx, jc, req)
	if err != nil {
		return nil, fmt.Errorf("%s: applying %d journal changes: %w", name, len(req.Changes), err)
	}
	return resp, nil
}

// UpsertJournals is ApplyJournals, but a journal whose spec gives no
// revision is created or updated, whichever it needs, where gazctl would
// refuse to create a journal that exists: for applying the same files on
// every start of a stack.
func UpsertJournals(ctx context.Context, jc pb.JournalClient, name string, data []byte) (*pb.ApplyResponse, error) {
	var req, err = ParseJournals(name, data)
	if err != nil {
		return nil, err
	}
	for i := range req.Changes {
		if req.Changes[i].ExpectModRevision == 0 {
			req.Changes[i].ExpectModRevision = -1
		}
	}
	resp, err := client.ApplyJournals(ctx, jc, req)
	if err != nil {
		return nil, fmt.Errorf("%s: applying %d journal changes: %w", name, len(req.Changes), err)
	}
	return resp, nil
}

// ApplyJournalsFile reads the file at path and applies it (see ApplyJournals).
func ApplyJournalsFile(ctx context.Context, jc pb.JournalClient, path string) (*pb.ApplyResponse, error) {
	var data, err = os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading journal specs: %w", err)
	}
	return ApplyJournals(ctx, jc, path, data)
}
