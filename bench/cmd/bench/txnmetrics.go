package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// txnMetrics sum the transaction metrics of a member's shards, as both
// sides serve them under Gazette's names: gazette_shard_transactions_total
// and gazette_shard_phase_seconds_total (ours serves Gazette's consumer
// metrics with their meaning, beside its own).
type txnMetrics struct {
	txns     float64 // Transactions fully committed.
	messages float64 // Messages they consumed.
	// Seconds of each phase, all shards' transactions told: consuming is
	// from a transaction's first message until it finalizes or stalls,
	// stalled waiting on its predecessor past its maximum duration,
	// preparing its finalization through the start of its commit,
	// committing until the commit is durable.
	consuming, stalled, preparing, committing float64
}

// meanMillis is seconds over the transactions, in milliseconds.
func (m txnMetrics) meanMillis(seconds float64) float64 {
	if m.txns == 0 {
		return 0
	}
	return seconds / m.txns * 1e3
}

// String tells the transactions and the mean of their phases.
func (m txnMetrics) String() string {
	return fmt.Sprintf("txns %5.0f (%6.0f msgs each), mean ms: consuming %6.1f stalled %6.1f preparing %5.1f committing %6.1f",
		m.txns, m.messages/max(m.txns, 1), m.meanMillis(m.consuming), m.meanMillis(m.stalled), m.meanMillis(m.preparing), m.meanMillis(m.committing))
}

// metricsURL is where a member of side serves its Prometheus metrics:
// Gazette's consumers at /debug/metrics, ours at /metrics.
func metricsURL(side, port string) string {
	if side == "anchor" {
		return "http://127.0.0.1:" + port + "/debug/metrics"
	}
	return "http://127.0.0.1:" + port + "/metrics"
}

// fetchMetrics returns the text of the Prometheus metrics served at url.
func fetchMetrics(ctx context.Context, url string) ([]byte, error) {
	var req, err = http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching metrics from %s: %s", url, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("fetching metrics from %s: %w", url, err)
	}
	return b, nil
}

// parseTxnMetrics sums the transaction metrics of every shard in text,
// Prometheus' text exposition format.
func parseTxnMetrics(text string) (txnMetrics, error) {
	var m txnMetrics
	var sc = bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line = sc.Text()
		var name, rest, ok = strings.Cut(line, "{")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		var into *float64
		switch name {
		case "gazette_shard_transactions_total":
			into = &m.txns
		case "gazette_shard_read_messages_total":
			into = &m.messages
		case "gazette_shard_phase_seconds_total":
			switch {
			case strings.Contains(rest, `phase="20-consuming"`):
				into = &m.consuming
			case strings.Contains(rest, `phase="30-stalled"`):
				into = &m.stalled
			case strings.Contains(rest, `phase="40-preparing"`):
				into = &m.preparing
			case strings.Contains(rest, `phase="50-committing"`):
				into = &m.committing
			}
		}
		if into == nil {
			continue
		}
		var i = strings.LastIndexByte(rest, '}')
		if i < 0 {
			return m, fmt.Errorf("metric line %q: no end to its labels", line)
		}
		var fields = strings.Fields(rest[i+1:]) // The value, and perhaps a timestamp.
		if len(fields) == 0 {
			return m, fmt.Errorf("metric line %q: no value", line)
		}
		var v, err = strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return m, fmt.Errorf("metric line %q: %w", line, err)
		}
		*into += v
	}
	if err := sc.Err(); err != nil {
		return m, fmt.Errorf("reading metrics: %w", err)
	}
	return m, nil
}
