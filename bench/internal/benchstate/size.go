package benchstate

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseBytes parses a size such as 1GiB, 64MiB, 512KiB or 1000, as the
// benchmarks' size flags take them.
func ParseBytes(s string) (int64, error) {
	for _, u := range []struct {
		suffix string
		scale  int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}, {"", 1}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			var n, err = strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, fmt.Errorf("size %q: %w", s, err)
			}
			return int64(n * float64(u.scale)), nil
		}
	}
	panic("not reached") // The empty suffix matches every string.
}
