package keyenc

import (
	"bytes"
	"cmp"
	"math"
	"testing"
)

func sign(c int) int { return cmp.Compare(c, 0) }

func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want []byte }{
		{nil, nil},
		{[]byte{0xFF, 0xFF}, nil},
		{[]byte{1, 2}, []byte{1, 3}},
		{[]byte{1, 0xFF}, []byte{2}},
	} {
		if got := PrefixEnd(tc.in); !bytes.Equal(got, tc.want) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", tc.in, got, tc.want)
		}
	}
	// Every key with the prefix sorts before PrefixEnd.
	p := AppendString(nil, "table", Ascending)
	k := AppendBytes(append([]byte(nil), p...), []byte{0xFF, 0xFF, 0xFF}, Ascending)
	if bytes.Compare(k, PrefixEnd(p)) >= 0 {
		t.Errorf("key %x with prefix %x not below PrefixEnd %x", k, p, PrefixEnd(p))
	}
}

func TestDecodeErrors(t *testing.T) {
	if _, _, err := DecodeInt(nil, Ascending); err == nil {
		t.Error("DecodeInt(nil) succeeded")
	}
	if _, _, err := DecodeBytes([]byte{0x12, 'a'}, Ascending); err == nil {
		t.Error("DecodeBytes of unterminated bytes succeeded")
	}
	if _, _, err := DecodeBool(AppendUint(nil, 2, Ascending), Ascending); err == nil {
		t.Error("DecodeBool(2) succeeded")
	}
	if _, _, _, err := DecodeTimestamp(AppendInt(AppendInt(nil, 1, Ascending), math.MaxInt64, Ascending), Ascending); err == nil {
		t.Error("DecodeTimestamp with overflowing nanos succeeded")
	}
}

func TestCompositeOrder(t *testing.T) {
	// (user ascending, ts descending): same user, later ts sorts first.
	key := func(user string, ts int64) []byte {
		return AppendInt(AppendString(nil, user, Ascending), ts, Descending)
	}
	keys := [][]byte{key("a", 10), key("a", 5), key("a", -1), key("ab", 100), key("b", math.MaxInt64), key("b", math.MinInt64)}
	for i := 1; i < len(keys); i++ {
		if bytes.Compare(keys[i-1], keys[i]) >= 0 {
			t.Errorf("key %d (%x) not below key %d (%x)", i-1, keys[i-1], i, keys[i])
		}
	}
}

func FuzzInt(f *testing.F) {
	for _, v := range []int64{0, 1, -1, 127, 128, -129, math.MaxInt64, math.MinInt64} {
		f.Add(v, int64(0), false)
	}
	f.Fuzz(func(t *testing.T, a, b int64, desc bool) {
		d := Ascending
		if desc {
			d = Descending
		}
		ea, eb := AppendInt(nil, a, d), AppendInt(nil, b, d)
		want := cmp.Compare(a, b)
		if d == Descending {
			want = -want
		}
		if got := sign(bytes.Compare(ea, eb)); got != want {
			t.Fatalf("%s order of %d, %d: encodings compare %d, want %d", d, a, b, got, want)
		}
		rest, v, err := DecodeInt(append(ea, 0x42), d)
		if err != nil || v != a || !bytes.Equal(rest, []byte{0x42}) {
			t.Fatalf("round trip of %d: got %d, rest %x, err %v", a, v, rest, err)
		}
	})
}

func FuzzUint(f *testing.F) {
	for _, v := range []uint64{0, 1, 108, 109, 255, 256, math.MaxUint64} {
		f.Add(v, uint64(1), true)
	}
	f.Fuzz(func(t *testing.T, a, b uint64, desc bool) {
		d := Ascending
		if desc {
			d = Descending
		}
		ea, eb := AppendUint(nil, a, d), AppendUint(nil, b, d)
		want := cmp.Compare(a, b)
		if d == Descending {
			want = -want
		}
		if got := sign(bytes.Compare(ea, eb)); got != want {
			t.Fatalf("%s order of %d, %d: encodings compare %d, want %d", d, a, b, got, want)
		}
		if _, v, err := DecodeUint(ea, d); err != nil || v != a {
			t.Fatalf("round trip of %d: got %d, err %v", a, v, err)
		}
	})
}

func FuzzBytes(f *testing.F) {
	for _, v := range [][]byte{nil, {0}, {0, 0}, {0xFF}, {0, 1}, []byte("abc")} {
		f.Add(v, []byte("ab"), false)
	}
	f.Fuzz(func(t *testing.T, a, b []byte, desc bool) {
		d := Ascending
		if desc {
			d = Descending
		}
		// Bytes and strings, each followed by another key element so that
		// self-delimitation is exercised.
		ea := AppendInt(AppendBytes(nil, a, d), 7, Ascending)
		eb := AppendInt(AppendBytes(nil, b, d), -7, Ascending)
		want := bytes.Compare(a, b)
		if want == 0 {
			want = 1 // 7 > -7.
		} else if d == Descending {
			want = -want
		}
		if got := sign(bytes.Compare(ea, eb)); got != want {
			t.Fatalf("%s order of %x, %x: encodings compare %d, want %d", d, a, b, got, want)
		}
		rest, v, err := DecodeBytes(ea, d)
		if err != nil || !bytes.Equal(v, a) {
			t.Fatalf("round trip of %x: got %x, err %v", a, v, err)
		}
		if _, n, err := DecodeInt(rest, Ascending); err != nil || n != 7 {
			t.Fatalf("decoding after %x: got %d, err %v", a, n, err)
		}
		ss := AppendString(nil, string(a), d)
		if !bytes.Equal(ss, AppendBytes(nil, a, d)) {
			t.Fatalf("string and bytes encodings of %x differ", a)
		}
		if _, s, err := DecodeString(ss, d); err != nil || s != string(a) {
			t.Fatalf("string round trip of %q: got %q, err %v", a, s, err)
		}
	})
}

func FuzzTimestampBool(f *testing.F) {
	f.Add(int64(0), int32(0), int64(0), int32(1), false, true, false)
	f.Add(int64(-1), int32(999999999), int64(0), int32(0), true, true, true)
	f.Fuzz(func(t *testing.T, s1 int64, n1 int32, s2 int64, n2 int32, b1, b2, desc bool) {
		d := Ascending
		if desc {
			d = Descending
		}
		want := cmp.Or(cmp.Compare(s1, s2), cmp.Compare(n1, n2))
		bw := cmp.Compare(btoi(b1), btoi(b2))
		if d == Descending {
			want, bw = -want, -bw
		}
		e1, e2 := AppendTimestamp(nil, s1, n1, d), AppendTimestamp(nil, s2, n2, d)
		if got := sign(bytes.Compare(e1, e2)); got != want {
			t.Fatalf("%s order of (%d,%d), (%d,%d): got %d, want %d", d, s1, n1, s2, n2, got, want)
		}
		if _, s, n, err := DecodeTimestamp(e1, d); err != nil || s != s1 || n != n1 {
			t.Fatalf("round trip of (%d,%d): got (%d,%d), err %v", s1, n1, s, n, err)
		}
		eb1, eb2 := AppendBool(nil, b1, d), AppendBool(nil, b2, d)
		if got := sign(bytes.Compare(eb1, eb2)); got != bw {
			t.Fatalf("%s order of %v, %v: got %d, want %d", d, b1, b2, got, bw)
		}
		if _, v, err := DecodeBool(eb1, d); err != nil || v != b1 {
			t.Fatalf("round trip of %v: got %v, err %v", b1, v, err)
		}
	})
}

// FuzzDecode checks that decoders reject or accept arbitrary input without
// panicking, and that whatever they accept re-encodes to the bytes consumed.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0x12, 0, 0xFF, 0, 1}, false)
	f.Add([]byte{0x88}, true)
	f.Add([]byte{0xFD, 0xFF}, false)
	f.Fuzz(func(t *testing.T, b []byte, desc bool) {
		d := Ascending
		if desc {
			d = Descending
		}
		if rest, v, err := DecodeInt(b, d); err == nil {
			if enc := AppendInt(nil, v, d); !bytes.Equal(enc, b[:len(b)-len(rest)]) {
				t.Errorf("int %d decoded from %x re-encodes as %x", v, b, enc)
			}
		}
		if rest, v, err := DecodeUint(b, d); err == nil {
			if enc := AppendUint(nil, v, d); !bytes.Equal(enc, b[:len(b)-len(rest)]) {
				t.Errorf("uint %d decoded from %x re-encodes as %x", v, b, enc)
			}
		}
		if rest, v, err := DecodeBytes(b, d); err == nil {
			if enc := AppendBytes(nil, v, d); !bytes.Equal(enc, b[:len(b)-len(rest)]) {
				t.Errorf("bytes %x decoded from %x re-encodes as %x", v, b, enc)
			}
		}
		_, _, _, _ = DecodeTimestamp(b, d)
		_, _, _ = DecodeBool(b, d)
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// FuzzAbsent checks that the encoding of an absent value sorts before that of
// every value, in either direction, whatever follows either, and that no
// value's encoding decodes as absent.
func FuzzAbsent(f *testing.F) {
	f.Add(int64(0), uint64(0), []byte(nil), false, []byte{0x42})
	f.Add(int64(math.MinInt64), uint64(math.MaxUint64), []byte{0, 0xFF}, true, []byte{0xFF, 0xFF})
	f.Fuzz(func(t *testing.T, i int64, u uint64, b []byte, desc bool, tail []byte) {
		d := Ascending
		if desc {
			d = Descending
		}
		absent := append(AppendAbsent(nil), 0xFF, 0xFF, 0xFF)
		for _, v := range [][]byte{
			AppendInt(nil, i, d), AppendUint(nil, u, d), AppendBytes(nil, b, d), AppendString(nil, string(b), d),
			AppendBool(nil, desc, d), AppendTimestamp(nil, i, int32(u), d),
		} {
			if _, ok := DecodeAbsent(v); ok {
				t.Fatalf("%s value encoding %x decodes as absent", d, v)
			}
			if bytes.Compare(absent, append(v, tail...)) >= 0 {
				t.Fatalf("absent %x does not sort before %s value %x", absent, d, v)
			}
		}
		rest, ok := DecodeAbsent(append(AppendAbsent(nil), tail...))
		if !ok || !bytes.Equal(rest, tail) {
			t.Fatalf("DecodeAbsent of absent then %x = %x, %v", tail, rest, ok)
		}
	})
}
