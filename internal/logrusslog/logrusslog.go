// Package logrusslog routes the logrus logs of Gazette's packages into
// log/slog, so a gazconsumer process has one log stream in one format.
package logrusslog

import (
	"context"
	"io"
	"log/slog"
	"sync"

	"github.com/sirupsen/logrus"
)

var once sync.Once

// Install makes logrus, the logger of Gazette's packages, forward every
// entry at or above level to slog.Default(). It is idempotent: only the
// first call's level takes effect.
func Install(level slog.Level) {
	once.Do(func() {
		logrus.SetOutput(io.Discard)
		logrus.SetLevel(toLogrus(level))
		logrus.AddHook(hook{})
	})
}

// InstallDefault installs (see Install) at the lowest level that
// slog.Default() logs, so that Gazette's logs follow the process's level.
func InstallDefault() {
	var level = slog.LevelError
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn} {
		if slog.Default().Enabled(context.Background(), l) {
			level = l
			break
		}
	}
	Install(level)
}

type hook struct{}

func (hook) Levels() []logrus.Level { return logrus.AllLevels }

func (hook) Fire(e *logrus.Entry) error {
	var attrs = make([]slog.Attr, 0, len(e.Data)+1)
	attrs = append(attrs, slog.String("component", "gazette"))
	for k, v := range e.Data {
		attrs = append(attrs, slog.Any(k, v))
	}
	var ctx = e.Context
	if ctx == nil {
		ctx = context.Background()
	}
	slog.Default().LogAttrs(ctx, toSlog(e.Level), e.Message, attrs...)
	return nil
}

func toSlog(l logrus.Level) slog.Level {
	switch l {
	case logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel:
		return slog.LevelError
	case logrus.WarnLevel:
		return slog.LevelWarn
	case logrus.InfoLevel:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}

func toLogrus(l slog.Level) logrus.Level {
	switch {
	case l >= slog.LevelError:
		return logrus.ErrorLevel
	case l >= slog.LevelWarn:
		return logrus.WarnLevel
	case l >= slog.LevelInfo:
		return logrus.InfoLevel
	default:
		return logrus.DebugLevel
	}
}
