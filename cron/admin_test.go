package cron_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/interval"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// TestRunRecordJSON checks a run's JSON: its duration in whole
// milliseconds under a name that says so, only for a run that finished, and
// back again.
func TestRunRecordJSON(t *testing.T) {
	started := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		run  cron.RunRecord
		want string // in the JSON
		not  string // not in it
	}{
		{"finished", cron.RunRecord{Slot: "s", Replica: "r1", Attempt: 1, Started: started, Finished: started.Add(1500 * time.Millisecond), Duration: 1500 * time.Millisecond, Outcome: "ok"},
			`"durationMs":1500`, `"duration"`},
		{"finished at once", cron.RunRecord{Slot: "s", Replica: "r1", Attempt: 1, Started: started, Finished: started, Outcome: "ok"},
			`"durationMs":0`, `"duration"`},
		{"in progress", cron.RunRecord{Slot: "s", Replica: "r1", Attempt: 2, Trigger: cron.TriggerRetry, Started: started, Deadline: started.Add(time.Minute)},
			`"deadline":"2026-03-01T12:01:00Z"`, `"durationMs"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.run)
			if err != nil {
				t.Fatalf("Marshal = %v", err)
			}
			if !strings.Contains(string(b), tc.want) || strings.Contains(string(b), tc.not) {
				t.Errorf("Marshal = %s, want %s in it and no %s", b, tc.want, tc.not)
			}
			var back cron.RunRecord
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("Unmarshal(%s) = %v", b, err)
			}
			if back != tc.run {
				t.Errorf("Unmarshal(Marshal(%+v)) = %+v", tc.run, back)
			}
		})
	}
	// Inside a JobStatus, through its pointers, too.
	st := cron.JobStatus{Job: "report", Last: &cron.RunRecord{Started: started, Finished: started.Add(time.Second), Duration: time.Second, Outcome: "ok"}}
	b, err := json.Marshal(st)
	if err != nil || !strings.Contains(string(b), `"last":{`) || !strings.Contains(string(b), `"durationMs":1000`) {
		t.Errorf("Marshal(JobStatus) = %s, %v; want last with durationMs 1000", b, err)
	}
}

// TestRunNowSubscriptionRefused starts a replica whose ACL user may not
// subscribe to the run-now channel, on a real redis-server: it says so at
// Error, instead of missing requests in silence; once the user is granted
// the channel, it hears requests again and says so.
func TestRunNowSubscriptionRefused(t *testing.T) {
	srv := redistest.Start(t)
	srv.SetUser(t, "deaf", "on", ">pw", "resetkeys", "~*", "resetchannels", "+@all")
	opts := srv.Options()
	opts.Username, opts.Password = "deaf", "pw"
	deaf := redis.NewClient(opts)
	t.Cleanup(func() { deaf.Close() })
	ran := make(chan cron.Tick, 10)
	job := cron.Func("report", interval.AtLeast(time.Hour), func(_ context.Context, tick cron.Tick) error {
		ran <- tick
		return nil
	}, cron.WithLease(cron.LeaseConfig{DB: lock.NewDB(deaf)}))
	logs := &records{}
	start(t, []cron.Job{job}, cron.WithLogger(slog.New(logs)))
	<-ran // the startup run

	const refused = "cron runtime can't hear run-now requests: Redis refused its subscription; a requested run waits for its job's next tick"
	within(t, "the refusal logged", func() bool { return len(logs.find(refused)) > 0 })
	rec := logs.find(refused)[0]
	if rec.Level != slog.LevelError || !strings.Contains(attr(rec, "error").String(), "NOPERM") {
		t.Errorf("%s: level %v, error %v; want Error and the server's NOPERM", refused, rec.Level, attr(rec, "error"))
	}

	srv.SetUser(t, "deaf", "&@@wakuwaku-cron:run-now")
	within(t, "the recovery logged", func() bool { return len(logs.find("cron runtime hears run-now requests again")) > 0 })
	if err := cron.NewAdmin(lock.NewDB(srv.Client(t))).RunNow(t.Context(), "report"); err != nil {
		t.Fatal(err)
	}
	select {
	case tick := <-ran:
		if tick.Trigger != cron.TriggerRequest {
			t.Errorf("a run with trigger %v after RunNow, want %v", tick.Trigger, cron.TriggerRequest)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no run within 10s of RunNow")
	}
	if n := len(logs.find(refused)); n != 1 {
		t.Errorf("the refusal logged %d times, want once", n)
	}
}

// within waits up to 10s for ok.
func within(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
