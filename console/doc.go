// Package console is the web console of a gazconsumer deployment: one
// read-only view, in a browser, of everything the deployment runs, built
// from the contracts Gazette's own tools use.
//
// A Console reads the consumer groups under an etcd prefix (each prefix
// with shard specs or members under it is one): their members' specs from
// etcd, their shards through a member's Shard API (List, then Stat of each
// primary), the write heads of their sources and the journals' fragments
// from the brokers (List, ListFragments), and their counters from the
// members' /metrics (runtime/shardmetrics, read as package
// internal/progress reads them for bankctl). Its state browser reads the
// queries services of a group (runtime/query) through a member's gRPC
// server reflection, builds a form from a method's request message, and
// calls the method through that member, which routes it to the shard
// holding its rows.
//
// Pages are rendered on the server (html/template), their assets embedded;
// a little JavaScript reloads a page's live part every 2 s and draws its
// charts (inline SVG) every second from the readings the Console keeps
// while it is watched. What cannot be read (a member down, a shard
// unassigned, a token refused) is shown on the page, never a blank one.
package console
