package logformat

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestHandler(t *testing.T) {
	for _, f := range Formats {
		if err := Valid(f); err != nil {
			t.Errorf("Valid(%q): %v", f, err)
		}
	}
	if err := Valid("xml"); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("Valid(xml): %v", err)
	}

	var buf bytes.Buffer
	var log = slog.New(Handler(&buf, "json", slog.LevelInfo))
	log.Info("one", "k", 1)
	log.Debug("hidden")
	log.Warn("two", "err", "x\ny")
	var lines = strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %q", len(lines), buf.String())
	}
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil || v["msg"] == nil || v["level"] == nil {
			t.Errorf("line %q: %v %v", l, v, err)
		}
	}

	for _, f := range []string{"text", "color"} {
		buf.Reset()
		slog.New(Handler(&buf, f, slog.LevelInfo)).Info("one", "k", 1)
		if !strings.Contains(buf.String(), "msg=one k=1") {
			t.Errorf("%s: %q", f, buf.String())
		}
	}
}
