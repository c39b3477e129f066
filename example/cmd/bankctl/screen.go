package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
)

// screen shows lines of progress. On a terminal it redraws them in place;
// elsewhere (a log, a pipe) it prints them at most every logInterval, and
// whenever they change in number.
type screen struct {
	out      io.Writer
	terminal bool
	drawn    int       // Lines drawn last, on a terminal.
	printed  time.Time // When lines were printed last, elsewhere.
}

// logInterval is the least time between two printings to a non-terminal.
const logInterval = 2 * time.Second

func newScreen(out io.Writer) *screen {
	var s = &screen{out: out}
	if f, ok := out.(*os.File); ok {
		s.terminal = isatty.IsTerminal(f.Fd())
	}
	return s
}

// show shows lines in place of those shown before.
func (s *screen) show(lines []string) {
	if s.terminal {
		var b strings.Builder
		if s.drawn != 0 {
			fmt.Fprintf(&b, "\x1b[%dA", s.drawn) // Back to the first line drawn.
		}
		for _, l := range lines {
			b.WriteString(l)
			b.WriteString("\x1b[K\n") // Clear what remains of the line.
		}
		_, _ = io.WriteString(s.out, b.String())
		s.drawn = len(lines)
		return
	}
	if time.Since(s.printed) < logInterval && len(lines) == s.drawn {
		return
	}
	s.final(lines)
}

// final shows lines as the last ones, on a terminal or not.
func (s *screen) final(lines []string) {
	if s.terminal {
		s.show(lines)
		return
	}
	s.printed, s.drawn = time.Now(), len(lines)
	_, _ = io.WriteString(s.out, strings.Join(lines, "\n")+"\n")
}

func sortStrings(s []string) []string {
	slices.Sort(s)
	return s
}
