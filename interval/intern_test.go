package interval

import (
	"runtime"
	"testing"
)

// TestSpecsShared checks that Cron parses a text once while its policy is
// in use, and lets the policy go once nothing uses it.
func TestSpecsShared(t *testing.T) {
	const text = "17 3 * * 1-5"
	a, err := Cron(text)
	if err != nil {
		t.Fatal(err)
	}
	b := MustCron(string([]byte(text))) // another string of the same text
	if a != b {
		t.Errorf("Cron(%q) != MustCron(%q): want one shared policy", text, text)
	}
	if c := MustCron("18 3 * * 1-5"); c == a {
		t.Errorf("two specs' Intervals are equal")
	}
	if every := MustCron("@every 1m"); every != MustCron("@every 1m") {
		t.Errorf("two @every 1m Intervals differ")
	}

	specs.mu.Lock()
	w := specs.m[text]
	specs.mu.Unlock()
	if w.Value() == nil {
		t.Fatalf("the cache lost %q while it is in use", text)
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.GC()
	if w.Value() != nil {
		t.Errorf("the cache keeps %q alive after its last use", text)
	}
	if specs.lookup(text) != nil {
		t.Errorf("lookup(%q) found a collected policy", text)
	}
	if _, err := Cron(text); err != nil {
		t.Errorf("Cron(%q) after its policy was collected = %v", text, err)
	}
}
