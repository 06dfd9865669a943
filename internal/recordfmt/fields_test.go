package recordfmt

import "testing"

// TestParseRun reads the run field in this release's layout, the previous
// release's (no beat), and an earlier one's (a token alone), with a
// replica's name that holds a '|'.
func TestParseRun(t *testing.T) {
	for _, tc := range []struct {
		name, v string
		want    RunField
	}{
		{"none", "", RunField{}},
		{"earlier layout", "tok", RunField{Token: "tok"}},
		{"this release", "tok|100|200|1|tick|s1|150|r|1",
			RunField{Token: "tok", Since: "100", Until: "200", Try: "1", Why: "tick", Slot: "s1", Beat: "150", By: "r|1", Valid: true}},
		{"previous release", "tok|100|200|1|tick|s1|r|1",
			RunField{Token: "tok", Since: "100", Until: "200", Try: "1", Why: "tick", Slot: "s1", By: "r|1", Valid: true}},
		{"previous release, a name like a beat", "tok|100|200|1|tick|s1|300|x",
			RunField{Token: "tok", Since: "100", Until: "200", Try: "1", Why: "tick", Slot: "s1", By: "300|x", Valid: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseRun(tc.v); got != tc.want {
				t.Errorf("ParseRun(%q) = %+v, want %+v", tc.v, got, tc.want)
			}
		})
	}
}

// TestParse reads every packed field of a record, each last part holding
// a '|'.
func TestParse(t *testing.T) {
	f := Parse(map[string]string{
		"slot":       "s1|100|open|2|300|l|x",
		"last":       "250|100|s1|1|tick|error|tok|r|1",
		"fail":       "250|100|s1|1|tick|error|r|1",
		"fail.error": "a|b",
		"paused":     "400|admin h/1",
		"want":       "500|a|b",
		"seen":       "600|r|1",
		"next":       "700",
		"good":       "800",
		"every":      `cron "0 * * * *"`,
	})
	want := Fields{
		Slot:      Slot{ID: "s1", At: "100", State: "open", Tries: "2", Retry: "300", Lease: "l|x"},
		Last:      Ended{End: "250", Start: "100", Slot: "s1", Try: "1", Why: "tick", Outcome: "error", Token: "tok", By: "r|1"},
		Fail:      Ended{End: "250", Start: "100", Slot: "s1", Try: "1", Why: "tick", Outcome: "error", By: "r|1"},
		FailError: "a|b",
		Paused:    Mark{MS: "400", By: "admin h/1"},
		Want:      Mark{MS: "500", By: "a|b"},
		Seen:      Mark{MS: "600", By: "r|1"},
		Next:      "700",
		Good:      "800",
		Every:     `cron "0 * * * *"`,
	}
	if f != want {
		t.Errorf("Parse = %+v, want %+v", f, want)
	}
	if s := ParseSkip("100|paused|s1|tok|r|1"); s != (Skip{At: "100", Reason: "paused", ID: "s1", Token: "tok", By: "r|1"}) {
		t.Errorf("ParseSkip = %+v", s)
	}
}
