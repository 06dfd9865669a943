package fault

import (
	"testing"
	"time"
)

// TestKeysOutlive: a Lock's acquire that finds the lock busy a few
// milliseconds after its holder's lease ended, as after a slot migration
// whose MIGRATE re-set the key's TTL late on its new node (the fault
// suite's TestClusterMigration once failed so, on a loaded machine), is
// illegal by the bare model, and explained once the history says keys may
// outlive their TTL by that much; one found busy later than that stays
// illegal, and so does a second holder while the first's lease may live.
func TestKeysOutlive(t *testing.T) {
	ms := int64(time.Millisecond)
	const ttl = 100 * time.Millisecond
	history := func(busyAt int64, took bool) *History {
		h := &History{}
		h.Add(
			Op{Client: 1, Kind: Acquire, Name: "n", Hold: 1, Call: 0, Return: ms, Ok: true},
			Op{Client: 2, Kind: Acquire, Name: "n", Hold: 2, Call: busyAt, Return: busyAt + ms/4, Ok: took},
		)
		return h
	}
	for _, tc := range []struct {
		name    string
		busyAt  int64 // when client 2's acquire was called
		took    bool  // whether it got the lock
		outlive time.Duration
		want    Result
	}{
		{"busy 5 ms after the lease's latest end, no allowance", 107 * ms, false, 0, Illegal},
		{"busy 5 ms after the lease's latest end, keys outlive by 5 ms", 107 * ms, false, 5 * time.Millisecond, Ok},
		{"busy 19 ms after the lease's latest end, keys outlive by 5 ms", 121 * ms, false, 5 * time.Millisecond, Illegal},
		{"taken 5 ms after the lease's latest end, keys outlive by 5 ms", 107 * ms, true, 5 * time.Millisecond, Ok},
		{"taken before the lease's end, keys outlive by 5 ms", 90 * ms, true, 5 * time.Millisecond, Illegal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := history(tc.busyAt, tc.took)
			h.KeysOutlive(tc.outlive)
			if c := h.Linearizable(ttl, Lock, Limits{Memory: 1 << 20, Time: time.Minute}); c.Result != tc.want {
				t.Errorf("%v, want %s", c, tc.want)
			}
		})
	}
}
