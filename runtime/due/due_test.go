package due

import (
	"bytes"
	"testing"
	"time"
)

// Keys order by time, then kind and subject, and parse back to what they
// were made of.
func TestKeys(t *testing.T) {
	var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var keys = [][]byte{
		AppendKey(nil, time.Unix(0, -5), Timer, []byte("z")),
		AppendKey(nil, time.Unix(0, 0), Expiry, []byte("b")),
		AppendKey(nil, base, Expiry, []byte("a")),
		AppendKey(nil, base, Expiry, []byte("b")),
		AppendKey(nil, base, Timer, []byte("a")),
		AppendKey(nil, base.Add(time.Nanosecond), Expiry, nil),
	}
	for i := 1; i < len(keys); i++ {
		if bytes.Compare(keys[i-1], keys[i]) >= 0 {
			t.Errorf("key %d %x orders after key %d %x", i-1, keys[i-1], i, keys[i])
		}
	}
	var start, end = Through(base)
	for i, k := range keys {
		var in = bytes.Compare(k, start) >= 0 && bytes.Compare(k, end) < 0
		if in != (i < 5) {
			t.Errorf("key %d in the scan through %v: %v", i, base, in)
		}
		if bytes.Compare(k, End()) >= 0 {
			t.Errorf("key %d past End", i)
		}
	}
	if at, kind, subject, err := ParseKey(keys[4]); err != nil || !at.Equal(base) || kind != Timer || string(subject) != "a" {
		t.Errorf("ParseKey = %v, %v, %q, %v", at, kind, subject, err)
	}
	for _, bad := range [][]byte{nil, []byte(Prefix), append(AppendKey(nil, base, Timer, nil)[:len(Prefix)+8], 'x')} {
		if _, _, _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) succeeded", bad)
		}
	}
	if got, err := ParseTime(AppendTime(nil, base)); err != nil || !got.Equal(base) {
		t.Errorf("ParseTime = %v, %v", got, err)
	}
	if _, err := ParseTime([]byte{1}); err == nil {
		t.Error("ParseTime of one byte succeeded")
	}
}

// FuzzKeys checks that keys parse back, and order as their times, kinds and
// subjects do.
func FuzzKeys(f *testing.F) {
	f.Add(int64(0), int64(1), byte('e'), byte('t'), []byte("a"), []byte("b"))
	f.Add(int64(-1), int64(1<<62), byte('t'), byte('t'), []byte{}, []byte{0xff})
	f.Fuzz(func(t *testing.T, n1, n2 int64, k1, k2 byte, s1, s2 []byte) {
		var kinds = [2]Kind{Expiry, Timer}
		var a, b = time.Unix(0, n1), time.Unix(0, n2)
		var ka, kb = kinds[k1%2], kinds[k2%2]
		var x, y = AppendKey(nil, a, ka, s1), AppendKey(nil, b, kb, s2)
		for _, c := range []struct {
			key     []byte
			at      time.Time
			kind    Kind
			subject []byte
		}{{x, a, ka, s1}, {y, b, kb, s2}} {
			var at, kind, subject, err = ParseKey(c.key)
			if err != nil || !at.Equal(c.at) || kind != c.kind || !bytes.Equal(subject, c.subject) {
				t.Fatalf("ParseKey(%x) = %v, %v, %x, %v; want %v, %v, %x", c.key, at, kind, subject, err, c.at, c.kind, c.subject)
			}
		}
		var want int
		switch {
		case n1 != n2:
			want = map[bool]int{true: -1, false: 1}[n1 < n2]
		case ka != kb:
			want = map[bool]int{true: -1, false: 1}[ka < kb]
		default:
			want = bytes.Compare(s1, s2)
		}
		if got := bytes.Compare(x, y); got != want {
			t.Fatalf("keys of (%d %v %x) and (%d %v %x) compare %d, want %d", n1, ka, s1, n2, kb, s2, got, want)
		}
		var _, end = Through(a)
		if n1 < 1<<63-1 && bytes.Compare(x, end) >= 0 {
			t.Fatalf("key due at %d is past the end of the scan through it", n1)
		}
	})
}
