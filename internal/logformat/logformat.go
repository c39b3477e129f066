// Package logformat builds the slog handlers of the log formats Gazette's
// commands accept (mainboilerplate.LogConfig's --log.format): json, text
// and color. slog has no colored handler: color logs as text.
package logformat

import (
	"fmt"
	"io"
	"log/slog"
)

// Formats are the accepted names of log formats, as Gazette's.
var Formats = []string{"json", "text", "color"}

// Valid returns an error unless format is one of Formats.
func Valid(format string) error {
	switch format {
	case "json", "text", "color":
		return nil
	}
	return fmt.Errorf("%q is not a log format (json, text or color)", format)
}

// Handler returns a handler writing to w in format, at level: JSON lines
// for json, slog's key=value text for text and color. An invalid format
// logs as text.
func Handler(w io.Writer, format string, level slog.Leveler) slog.Handler {
	var opts = &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.NewJSONHandler(w, opts)
	}
	return slog.NewTextHandler(w, opts)
}
