package interval_test

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones' rules, whatever the machine has installed

	"github.com/wakuwaku-go/wakuwaku/interval"
)

// slotWant is a slot's start, in UTC, and its key.
type slotWant struct {
	start string
	key   string
}

// TestDaylightSaving walks the slots of zoned specs across daylight-saving
// changes: a repeated wall time is one slot at its first instant, a skipped
// one runs right after the change, and a day whose midnight doesn't exist
// still gets its midnight run.
func TestDaylightSaving(t *testing.T) {
	tests := []struct {
		name  string
		spec  string
		after string // UTC
		want  []slotWant
	}{
		{"fall back: 01:30 once", "CRON_TZ=America/New_York 30 1 * * *", "2026-10-31T12:00:00Z", []slotWant{
			{"2026-11-01T05:30:00Z", "2026-11-01T01:30:00[America/New_York]"}, // EDT
			{"2026-11-02T06:30:00Z", "2026-11-02T01:30:00[America/New_York]"}, // EST
		}},
		{"fall back: half hours through the night", "CRON_TZ=America/New_York */30 * * * *", "2026-11-01T04:45:00Z", []slotWant{
			{"2026-11-01T05:00:00Z", "2026-11-01T01:00:00[America/New_York]"},
			{"2026-11-01T05:30:00Z", "2026-11-01T01:30:00[America/New_York]"},
			// 01:00 and 01:30 EST show again and are not slots again.
			{"2026-11-01T07:00:00Z", "2026-11-01T02:00:00[America/New_York]"},
			{"2026-11-01T07:30:00Z", "2026-11-01T02:30:00[America/New_York]"},
		}},
		{"fall back: from inside the repeated hour", "CRON_TZ=America/New_York */30 * * * *", "2026-11-01T06:10:00Z", []slotWant{
			{"2026-11-01T07:00:00Z", "2026-11-01T02:00:00[America/New_York]"},
		}},
		{"fall back: every second of the repeated hour once", "CRON_TZ=America/New_York 59 59 1 * * *", "2026-11-01T05:00:00Z", []slotWant{
			{"2026-11-01T05:59:59Z", "2026-11-01T01:59:59[America/New_York]"},
			{"2026-11-02T06:59:59Z", "2026-11-02T01:59:59[America/New_York]"},
		}},
		{"spring forward: 02:30 runs at 03:00", "CRON_TZ=America/New_York 30 2 * * *", "2027-03-13T12:00:00Z", []slotWant{
			{"2027-03-14T07:00:00Z", "2027-03-14T02:30:00[America/New_York]"}, // 03:00 EDT
			{"2027-03-15T06:30:00Z", "2027-03-15T02:30:00[America/New_York]"},
		}},
		{"spring forward: the skipped hour runs once", "CRON_TZ=America/New_York */30 * * * *", "2027-03-14T06:15:00Z", []slotWant{
			{"2027-03-14T06:30:00Z", "2027-03-14T01:30:00[America/New_York]"}, // EST
			{"2027-03-14T07:00:00Z", "2027-03-14T02:00:00[America/New_York]"}, // 03:00 EDT, for 02:00, 02:30 and 03:00
			{"2027-03-14T07:30:00Z", "2027-03-14T03:30:00[America/New_York]"},
		}},
		{"spring forward: 03:00 itself", "CRON_TZ=America/New_York 0 3 * * *", "2027-03-13T12:00:00Z", []slotWant{
			{"2027-03-14T07:00:00Z", "2027-03-14T03:00:00[America/New_York]"},
		}},
		{"a midnight that doesn't exist", "CRON_TZ=America/Sao_Paulo 0 0 4 11 *", "2018-01-01T00:00:00Z", []slotWant{
			{"2018-11-04T03:00:00Z", "2018-11-04T00:00:00[America/Sao_Paulo]"}, // 01:00 -02
			{"2019-11-04T03:00:00Z", "2019-11-04T00:00:00[America/Sao_Paulo]"}, // 00:00 -03
		}},
		{"daily across a missing midnight", "CRON_TZ=America/Sao_Paulo @daily", "2018-11-03T12:00:00Z", []slotWant{
			{"2018-11-04T03:00:00Z", "2018-11-04T00:00:00[America/Sao_Paulo]"},
			{"2018-11-05T02:00:00Z", "2018-11-05T00:00:00[America/Sao_Paulo]"},
		}},
		{"UTC has no changes", "CRON_TZ=UTC 30 1 * * *", "2026-10-31T12:00:00Z", []slotWant{
			{"2026-11-01T01:30:00Z", "2026-11-01T01:30:00Z"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			every := interval.MustCron(tc.spec)
			after := mustTime(t, tc.after)
			for i, want := range tc.want {
				slot, ok := every.NextSlot(after)
				key, _ := slot.Key()
				if !ok || !slot.Start.Equal(mustTime(t, want.start)) || key != want.key {
					t.Fatalf("slot %d: Cron(%q).NextSlot(%v) = %v (%q), %t; want %s (%q)",
						i, tc.spec, after.UTC(), slot.Start.UTC(), key, ok, want.start, want.key)
				}
				after = slot.Start
			}
		})
	}
}

// TestDaylightSavingPlan runs a scheduler's questions through the two New
// York nights: a tick per slot, and a replica that starts inside the
// repeated hour belongs to the slot the first pass ran.
func TestDaylightSavingPlan(t *testing.T) {
	every := interval.MustCron("CRON_TZ=America/New_York 30 1 * * *")
	// The startup tick at 01:45 EST, in the repeated hour: its slot is
	// 01:30 as it first showed, so a leased job doesn't run it again.
	start := mustTime(t, "2026-11-01T06:45:00Z")
	p := every.Plan(start, start)
	if key, _ := p.Slot.Key(); key != "2026-11-01T01:30:00[America/New_York]" || !p.Slot.Start.Equal(mustTime(t, "2026-11-01T05:30:00Z")) || p.Late {
		t.Errorf("Plan(%v) slot = %v (%q), late %t; want 05:30Z, 2026-11-01T01:30:00[America/New_York], not late", start, p.Slot.Start, key, p.Late)
	}
	if !p.HasNext || !p.Next.Equal(mustTime(t, "2026-11-02T06:30:00Z")) {
		t.Errorf("Plan(%v).Next = %v, %t; want 2026-11-02T06:30:00Z", start, p.Next, p.HasNext)
	}

	// A tick due at the spring-forward slot, handled a little late.
	every = interval.MustCron("CRON_TZ=America/New_York 30 2 * * *")
	due := mustTime(t, "2027-03-14T07:00:00Z")
	p = every.Plan(due, due.Add(2*time.Millisecond))
	if key, _ := p.Slot.Key(); key != "2027-03-14T02:30:00[America/New_York]" || !p.Scheduled.Equal(due) || p.Late {
		t.Errorf("Plan(%v) = slot %q, scheduled %v, late %t; want 2027-03-14T02:30:00[America/New_York] at %v, not late", due, key, p.Scheduled, p.Late, due)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// TestSlotsAcrossAYear walks a year of quarter-hour slots in zones with
// daylight saving (Lord Howe's moves by half an hour) and checks them
// against the clock itself: slots strictly increase, no key repeats, and
// every quarter-hour wall time that shows is a slot at its first instant.
func TestSlotsAcrossAYear(t *testing.T) {
	for _, zone := range []string{"America/New_York", "Europe/London", "Australia/Lord_Howe", "America/Sao_Paulo", "Pacific/Chatham"} {
		t.Run(zone, func(t *testing.T) {
			loc := mustZone(t, zone)
			every := interval.MustCron("CRON_TZ=" + zone + " */15 * * * *")
			from := time.Date(2018, time.January, 1, 0, 0, 0, 0, time.UTC)
			until := from.AddDate(1, 0, 0)

			starts := map[time.Time]string{}
			keys := map[string]bool{}
			prev := from
			for after := from; after.Before(until); {
				slot, ok := every.NextSlot(after)
				if !ok || !slot.Start.After(prev) {
					t.Fatalf("NextSlot(%v) = %v, %t; not after %v", after, slot.Start, ok, prev)
				}
				key, _ := slot.Key()
				if keys[key] {
					t.Fatalf("key %q twice (the second at %v)", key, slot.Start)
				}
				keys[key] = true
				starts[slot.Start.UTC()] = key
				prev, after = slot.Start, slot.Start
			}

			shown := map[string]bool{}
			for u := from.Add(time.Hour); u.Before(until.Add(-time.Hour)); u = u.Add(15 * time.Minute) {
				local := u.In(loc)
				if local.Minute()%15 != 0 || local.Second() != 0 {
					continue // a zone whose offset is not whole quarter hours
				}
				wall := local.Format("2006-01-02T15:04:05")
				first := !shown[wall]
				shown[wall] = true
				key, isSlot := starts[u]
				switch {
				case first && !isSlot:
					t.Errorf("%s (%v) shows first at %v, which is not a slot", wall, zone, u)
				case !first && isSlot && key == wall+"["+zone+"]":
					t.Errorf("%s shows again at %v, and is a slot again", wall, u)
				}
			}
		})
	}
}
