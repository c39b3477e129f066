package main

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func TestCheckSums(t *testing.T) {
	var want = map[string]int64{"key-000001": 10, "key-000002": 20, "key-000003": 30}
	var cases = []struct {
		name string
		got  map[string]int64
		msg  string // Of the error; "" if the sums are right.
	}{
		{"right", map[string]int64{"key-000001": 10, "key-000002": 20, "key-000003": 30}, ""},
		{"wrong sums", map[string]int64{"key-000001": 10, "key-000002": 21, "key-000003": 29},
			`ours computed wrong sums on workload small: key "key-000002" has sum 21, want 20 (2 wrong keys of 3: 0 missing, 0 unexpected)`},
		{"missing key", map[string]int64{"key-000002": 20, "key-000003": 30},
			`ours computed wrong sums on workload small: key "key-000001" has no sum, want 10 (1 wrong keys of 3: 1 missing, 0 unexpected)`},
		{"unexpected key", map[string]int64{"key-000001": 10, "key-000002": 20, "key-000003": 30, "key-000000": 0},
			`ours computed wrong sums on workload small: key "key-000000" has sum 0, but no message has the key (1 wrong keys of 3: 0 missing, 1 unexpected)`},
		{"empty", map[string]int64{},
			`ours computed wrong sums on workload small: key "key-000001" has no sum, want 10 (3 wrong keys of 3: 3 missing, 0 unexpected)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var err = checkSums("ours", "small", want, tc.got)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("right sums failed the check: %v", err)
				}
				return
			}
			var wrong *wrongSumsError
			if !errors.As(err, &wrong) {
				t.Fatalf("wrong sums passed the check (error %v)", err)
			} else if err.Error() != tc.msg {
				t.Fatalf("error\n  %s\nwant\n  %s", err, tc.msg)
			}
		})
	}
}

func TestCheckTotal(t *testing.T) {
	var want = map[string]int64{"a": 10, "b": 20}
	if err := checkTotal("small", rawResult{Messages: 4, Sum: 30}, want, 4); err != nil {
		t.Fatalf("the right total failed the check: %v", err)
	}
	for _, res := range []rawResult{{Messages: 3, Sum: 30}, {Messages: 4, Sum: 31}} {
		var err = checkTotal("small", res, want, 4)
		if err == nil || !strings.Contains(err.Error(), "raw read of workload small") {
			t.Fatalf("%+v: got %v, want an error naming the raw read and the workload", res, err)
		}
	}
}

func TestProcCPU(t *testing.T) {
	var busy int
	for i := range 50_000_000 {
		busy += i
	}
	var cpu, err = procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	} else if cpu <= 0 || busy == 0 {
		t.Fatalf("this process's CPU time is %v s after a busy loop, want > 0", cpu)
	}
}
