package logrusslog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// Gazette's logrus entries reach slog.Default() at its level, and not below.
func TestInstallDefaultFollowsSlogLevel(t *testing.T) {
	var buf bytes.Buffer
	var prev = slog.Default()
	defer slog.SetDefault(prev)
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))

	InstallDefault()
	logrus.WithField("journal", "a/b").Info("quiet")
	logrus.WithField("journal", "a/b").Warn("loud")

	var out = buf.String()
	if strings.Contains(out, "quiet") || !strings.Contains(out, "msg=loud") ||
		!strings.Contains(out, "journal=a/b") || !strings.Contains(out, "component=gazette") {
		t.Fatalf("slog received:\n%s", out)
	}
	if logrus.GetLevel() != logrus.WarnLevel {
		t.Fatalf("logrus level %s, want warn", logrus.GetLevel())
	}
}
