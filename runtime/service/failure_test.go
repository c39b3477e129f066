package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.gazette.dev/core/broker/client"
	pb "go.gazette.dev/core/broker/protocol"
	pc "go.gazette.dev/core/consumer/protocol"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/gazconsumer/gazconsumer/runtime"
	"github.com/gazconsumer/gazconsumer/runtime/membertest"
	"github.com/gazconsumer/gazconsumer/runtime/source"
)

// By default, a message that fails to decode fails the shard, and its
// status names the journal and the offset.
func TestUndecodableMessageFailsTheShard(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c = newCluster(t, 1)
	var stack = c.Stack

	var m = start(t, c, "member-a")
	var spec = c.ShardSpec(0)
	spec.HotStandbys = 0
	var shard = map[string]string{"shard": spec.Id.String()}
	var failures = scrape(t).value("gazconsumer_shard_failures_total", shard)
	var sc = shardClient(t, c, m)
	if resp, err := sc.Apply(ctx, &pc.ApplyRequest{Changes: []pc.ApplyRequest_Change{{Upsert: spec}}}); err != nil || resp.Status != pc.Status_OK {
		t.Fatalf("Apply: %v %v", resp, err)
	}
	if _, err := client.Append(ctx, stack.Journals(), pb.AppendRequest{Journal: c.Input(0)},
		strings.NewReader("{\"Key\": \"fine\", \"Value\": 1}\n{this is not json}\n")); err != nil {
		t.Fatal(err)
	}

	var st, err = c.WaitStatus(ctx, spec.Id, m.ID(), pc.ReplicaStatus_FAILED)
	must(t, err)
	// The bad line follows the 28 bytes of the good one.
	if len(st.Errors) != 1 || !strings.Contains(st.Errors[0], "journal "+c.Input(0).String()+" offset 28: undecodable message") {
		t.Fatalf("failed status %v does not name the journal and offset", st.Errors)
	}
	// It is counted, and gazette_shard_up says so.
	var after = scrape(t)
	if got := after.value("gazconsumer_shard_failures_total", shard) - failures; got != 1 {
		t.Errorf("gazconsumer_shard_failures_total grew by %v, want 1", got)
	}
	// The member reports the status it has observed in etcd, soon.
	for after.value("gazette_shard_up", map[string]string{"shard": spec.Id.String(), "status": "FAILED"}) != 1 {
		select {
		case <-ctx.Done():
			t.Fatalf("gazette_shard_up{status=FAILED} is not 1")
		case <-time.After(membertest.PollInterval):
		}
		after = scrape(t)
	}
	if got := after.value("gazconsumer_member_ready", map[string]string{"member": "member-a"}); got != 0 {
		t.Errorf("gazconsumer_member_ready of a member with a FAILED shard is %v, want 0", got)
	}
}

// Under the label on-decode-error=skip, undecodable messages are skipped,
// counted, and recorded once each into the dead-letter journal, even when
// the shard moves to another member.
func TestUndecodableMessagesAreSkippedAndRecorded(t *testing.T) {
	var ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var c = newCluster(t, 1)
	var a, b = start(t, c, "member-a"), start(t, c, "member-b")
	var sc = shardClient(t, c, a)

	// Invalid policies are refused.
	for _, tc := range []struct {
		labels []string
		code   codes.Code
		want   string
	}{
		{[]string{source.LabelOnDecodeError, "skip"}, codes.InvalidArgument, "needs label " + source.LabelDeadLetterJournal},
		{[]string{source.LabelOnDecodeError, "ignore"}, codes.InvalidArgument, `"ignore", not "fail" or "skip"`},
		{[]string{runtime.LabelMaxTxnBytes, "16MiB"}, codes.InvalidArgument, `label gazconsumer.dev/max-txn-bytes is "16MiB", not a number of bytes`},
		{[]string{runtime.LabelMaxTxnWrites, "lots"}, codes.InvalidArgument, `label gazconsumer.dev/max-txn-writes is "lots", not a number of keys`},
		{[]string{source.LabelOnDecodeError, "skip", source.LabelDeadLetterJournal, "nowhere/at-all"}, codes.FailedPrecondition, "dead-letter journal nowhere/at-all does not exist"},
		{[]string{source.LabelOnDecodeError, "skip", source.LabelDeadLetterJournal, c.ShardSpec(0).RecoveryLog().String()}, codes.FailedPrecondition, "has content-type"},
	} {
		var spec = c.ShardSpec(0)
		spec.LabelSet = pb.MustLabelSet(tc.labels...)
		var _, err = sc.Apply(ctx, &pc.ApplyRequest{Changes: []pc.ApplyRequest_Change{{Upsert: spec}}})
		if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Apply with labels %v: %v, want %s naming %q", tc.labels, err, tc.code, tc.want)
		}
	}

	must(t, c.ApplyShards(ctx, a, func(spec *pc.ShardSpec) {
		spec.HotStandbys = 0
		spec.LabelSet = pb.MustLabelSet(source.LabelOnDecodeError, "skip", source.LabelDeadLetterJournal, c.DeadLetters().String())
	}))
	var skippedBefore = scrape(t).value("gazconsumer_shard_skipped_messages_total", map[string]string{"shard": "shard-0"})

	// Good messages, an undecodable one, more good ones, and an undecodable
	// one last, which the checkpoint must also read past.
	var feedCtx, stopFeed = context.WithCancel(ctx)
	defer stopFeed()
	var feed = c.NewFeed(feedCtx)
	var bad [][]byte
	var badAt []pb.Offset
	var appendBad = func(line string) {
		var resp, err = client.Append(ctx, c.Stack.Journals(), pb.AppendRequest{Journal: c.Input(0)}, strings.NewReader(line))
		must(t, err)
		bad, badAt = append(bad, []byte(line)), append(badAt, resp.Commit.Begin)
	}
	must(t, feed.Publish(10))
	appendBad("{this is not json}\n")
	must(t, feed.Publish(10))
	appendBad("{\"Key\": 42}\n")
	must(t, c.WaitCaughtUp(ctx))

	var checkRecorded = func() {
		t.Helper()
		var got, err = source.ListSkipped(ctx, c.Stack.Journals(), c.DeadLetters())
		must(t, err)
		if len(got) != len(bad) {
			t.Fatalf("recorded %d skipped messages, want %d: %+v", len(got), len(bad), got)
		}
		for i, s := range got {
			if s.Shard != "shard-0" || s.Journal != c.Input(0) || s.Begin != badAt[i] ||
				s.End != badAt[i]+int64(len(bad[i])) || string(s.Content) != string(bad[i]) || s.Error == "" {
				t.Errorf("recorded %+v, want the %d bytes at offset %d: %q", s, len(bad[i]), badAt[i], bad[i])
			}
		}
	}
	checkRecorded()
	if got := scrape(t).value("gazconsumer_shard_skipped_messages_total", map[string]string{"shard": "shard-0"}) - skippedBefore; got != 2 {
		t.Errorf("the skipped messages metric grew by %v, want 2", got)
	}

	// The shard moves to the other member, which resumes from the
	// checkpoint: nothing is skipped or recorded twice.
	var primary, err = c.PrimaryOf(ctx, "shard-0")
	must(t, err)
	must(t, primary.Stop())
	must(t, feed.Publish(10))
	must(t, c.WaitCaughtUp(ctx))
	if m, _ := c.PrimaryOf(ctx, "shard-0"); m == primary || (m != a && m != b) {
		t.Fatalf("shard-0 did not move")
	}
	checkRecorded()
	checkExact(t, ctx, c, feed)
}
