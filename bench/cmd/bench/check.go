package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	benchv1 "github.com/gazconsumer/gazconsumer/bench/gen/gazconsumer/bench/v1"
	"github.com/gazconsumer/gazconsumer/bench/internal/workload"
	"github.com/gazconsumer/gazconsumer/runtime/query"
	"google.golang.org/grpc"
)

// Every consumer run ends with a check of its final state: after its shards
// have committed through their partitions' write heads, the driver reads
// back the sum of every key (ours through its queries service,
// SummerQueries.ListSums; the anchor through the HTTP endpoint its
// application serves, workload.AnchorSumsPath) and compares them with the
// sums the published messages imply. The raw read, which keeps no state,
// reports the number of messages it decoded and the total of their values.
// A run whose answer is wrong fails, naming the side, the workload and the
// first wrong key.

// wrongSumsError is the error of a side whose final state is not the one
// its load implies.
type wrongSumsError struct {
	side, workload string
	key            string // The first wrong key, in key order.
	got, want      int64
	gotOK, wantOK  bool // Whether the key has a sum in got, in want.
	wrong, keys    int  // Wrong keys (missing, unexpected or other sums), keys wanted.
	missing, extra int  // Keys missing from got, and in got but not wanted.
}

func (e *wrongSumsError) Error() string {
	var what string
	switch {
	case !e.gotOK:
		what = fmt.Sprintf("has no sum, want %d", e.want)
	case !e.wantOK:
		what = fmt.Sprintf("has sum %d, but no message has the key", e.got)
	default:
		what = fmt.Sprintf("has sum %d, want %d", e.got, e.want)
	}
	return fmt.Sprintf("%s computed wrong sums on workload %s: key %q %s (%d wrong keys of %d: %d missing, %d unexpected)",
		e.side, e.workload, e.key, what, e.wrong, e.keys, e.missing, e.extra)
}

// checkSums checks that got, the final state side computed on workload,
// holds exactly the sums of want, what its load implies. Its error names
// the first wrong key in key order.
func checkSums(side, workload string, want, got map[string]int64) error {
	var wrong []string
	var missing, extra int
	for key, w := range want {
		if g, ok := got[key]; !ok {
			wrong, missing = append(wrong, key), missing+1
		} else if g != w {
			wrong = append(wrong, key)
		}
	}
	for key := range got {
		if _, ok := want[key]; !ok {
			wrong, extra = append(wrong, key), extra+1
		}
	}
	if len(wrong) == 0 {
		return nil
	}
	var key = slices.Min(wrong)
	var e = &wrongSumsError{side: side, workload: workload, key: key, wrong: len(wrong), keys: len(want), missing: missing, extra: extra}
	e.got, e.gotOK = got[key]
	e.want, e.wantOK = want[key]
	return e
}

// checkTotal checks the raw read's messages and total of their values.
func checkTotal(workload string, res rawResult, want map[string]int64, messages int) error {
	var total int64
	for _, v := range want {
		total += v
	}
	if res.Messages != int64(messages) || res.Sum != total {
		return fmt.Errorf("raw read of workload %s: decoded %d messages whose values total %d, want %d messages totalling %d",
			workload, res.Messages, res.Sum, messages, total)
	}
	return nil
}

// readSums reads the final state of a consumer of side serving at
// 127.0.0.1:port (whose gRPC connection is conn), of shards shards.
func readSums(ctx context.Context, side string, conn grpc.ClientConnInterface, port string, shards int) (map[string]int64, error) {
	if side == "anchor" {
		return readAnchorSums(ctx, port, shards)
	}
	return readOurSums(ctx, conn)
}

// readOurSums pages through SummerQueries.ListSums, which every shard
// answers, merged by the member.
func readOurSums(ctx context.Context, conn grpc.ClientConnInterface) (map[string]int64, error) {
	var client = benchv1.NewSummerQueriesClient(query.NewClient(conn, nil))
	var sums = make(map[string]int64)
	var req = &benchv1.ListSumsRequest{Limit: 1000}
	for {
		var page, err = client.ListSums(ctx, req)
		if err != nil {
			return nil, fmt.Errorf("ListSums after %d sums: %w", len(sums), err)
		}
		for _, s := range page.Sums {
			if _, dup := sums[s.Key]; dup {
				return nil, fmt.Errorf("ListSums returned key %q twice", s.Key)
			}
			sums[s.Key] = s.Value
		}
		if page.NextPageToken == "" {
			return sums, nil
		}
		req.PageToken = page.NextPageToken
	}
}

// readAnchorSums asks the anchor for the sums of each of its shards.
func readAnchorSums(ctx context.Context, port string, shards int) (map[string]int64, error) {
	var sums = make(map[string]int64)
	for i := range shards {
		var shard, err = getAnchorSums(ctx, "http://127.0.0.1:"+port+workload.AnchorSumsPath+"?shard="+string(workload.ShardID(i)))
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", workload.ShardID(i), err)
		}
		for key, v := range shard {
			if _, dup := sums[key]; dup {
				return nil, fmt.Errorf("key %q is in two shards", key)
			}
			sums[key] = v
		}
	}
	return sums, nil
}

func getAnchorSums(ctx context.Context, url string) (map[string]int64, error) {
	var req, err = http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var msg, _ = io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(msg)))
	}
	var sums map[string]int64
	if err = json.NewDecoder(resp.Body).Decode(&sums); err != nil {
		return nil, fmt.Errorf("decoding the answer of %s: %w", url, err)
	}
	return sums, nil
}
