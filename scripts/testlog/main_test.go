package main

import (
	"strings"
	"testing"
)

func TestCopyLog(t *testing.T) {
	const stream = `{"Action":"start","Package":"a"}
{"Action":"run","Package":"a","Test":"TestOK"}
{"Action":"output","Package":"a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"a","Test":"TestOK","Output":"    quiet on success\n"}
{"Action":"pass","Package":"a","Test":"TestOK"}
{"Action":"run","Package":"a","Test":"TestLandlock"}
{"Action":"output","Package":"a","Test":"TestLandlock","Output":"=== RUN   TestLandlock\n"}
{"Action":"output","Package":"a","Test":"TestLandlock","Output":"    x_test.go:9: needs Landlock ABI 1, this kernel has 0\n"}
{"Action":"output","Package":"a","Test":"TestLandlock","Output":"--- SKIP: TestLandlock (0.00s)\n"}
{"Action":"skip","Package":"a","Test":"TestLandlock"}
{"Action":"output","Package":"a","Output":"PASS\n"}
{"Action":"output","Package":"a","Output":"ok  \ta\t0.1s\n"}
{"Action":"pass","Package":"a"}
{"Action":"run","Package":"b","Test":"TestBad"}
{"Action":"output","Package":"b","Test":"TestBad","Output":"    b_test.go:3: boom\n"}
{"Action":"fail","Package":"b","Test":"TestBad"}
{"Action":"run","Package":"b","Test":"TestHangs"}
{"Action":"output","Package":"b","Test":"TestHangs","Output":"panic: test timed out\n"}
{"Action":"output","Package":"b","Output":"FAIL\tb\t600s\n"}
{"Action":"fail","Package":"b"}
{"Action":"output","Package":"c","Output":"?   \tc\t[no test files]\n"}
{"Action":"skip","Package":"c"}
go: downloading nothing
`
	var out strings.Builder
	r, err := copyLog(&out, strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	want := "ok  \ta\t0.1s\n    b_test.go:3: boom\nFAIL\tb\t600s\npanic: test timed out\n?   \tc\t[no test files]\ngo: downloading nothing\n"
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
	if !r.failed || r.packages != 3 || len(r.skips) != 1 || r.skips[0] != (skip{"a", "TestLandlock", "x_test.go:9: needs Landlock ABI 1, this kernel has 0"}) {
		t.Errorf("report %+v", r)
	}
	out.Reset()
	if code := r.summary(&out, false); code != 1 || !strings.Contains(out.String(), "1 tests skipped:\n  a TestLandlock: x_test.go:9") {
		t.Errorf("summary: %d\n%s", code, out.String())
	}
}

// TestSummaryCI: under CI a skip fails the run; without CI it is listed
// only. A run that tested nothing fails.
func TestSummaryCI(t *testing.T) {
	r := report{packages: 1, skips: []skip{{"a", "TestX", "why"}}}
	var out strings.Builder
	if code := r.summary(&out, false); code != 0 {
		t.Errorf("without CI: exit %d", code)
	}
	out.Reset()
	if code := r.summary(&out, true); code != 1 || !strings.Contains(out.String(), "no test may skip") {
		t.Errorf("under CI: exit %d\n%s", code, out.String())
	}
	if code := (report{}).summary(&out, false); code != 1 {
		t.Errorf("nothing tested: exit %d", code)
	}
	if code := (report{packages: 2}).summary(&out, true); code != 0 {
		t.Errorf("all passed under CI: exit %d", code)
	}
}
