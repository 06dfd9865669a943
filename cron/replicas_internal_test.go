package cron

import (
	"slices"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// TestBeatOnce beats two replicas into one registry, on redis-server and
// on miniredis (the embedded Redis of the examples, and the simulator's):
// each beat answers the live replicas, and a replica whose three beats
// passed drops out.
func TestBeatOnce(t *testing.T) {
	mr := miniredis.RunT(t)
	for name, c := range map[string]*redis.Client{
		"redis-server": redistest.Start(t).Client(t),
		"miniredis":    redis.NewClient(&redis.Options{Addr: mr.Addr()}),
	} {
		t.Run(name, func(t *testing.T) {
			key := groupKey([]string{"a", "b"})
			now := time.Now()
			if _, err := beatOnce(t.Context(), c, key, "r1", now.Add(-4*time.Second), time.Second); err != nil {
				t.Fatal(err)
			}
			live, err := beatOnce(t.Context(), c, key, "r0", now, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(live, []string{"r0"}) {
				t.Errorf("live = %v after r1's time ran out, want [r0]", live)
			}
			if live, err = beatOnce(t.Context(), c, key, "r2", now.Add(time.Second), time.Second); err != nil || !slices.Equal(live, []string{"r0", "r2"}) {
				t.Errorf("live = %v, %v; want [r0 r2]", live, err)
			}
			if ttl := c.PTTL(t.Context(), key).Val(); ttl <= 0 || ttl > 6*time.Second {
				t.Errorf("the registry's TTL is %v, want 6 beats at most", ttl)
			}
		})
	}
}

// TestOwner: one owner per slot among the live replicas, the same
// whichever order they come in; spread over the replicas; and a replica
// that does not know the live ones, or is not among them, owns every slot.
func TestOwner(t *testing.T) {
	reps := []string{"r0", "r1", "r2"}
	count := map[string]int{}
	for i := range 3000 {
		slot := time.Unix(int64(i), 0).UTC().Format(time.RFC3339Nano)
		o := owner(reps, "job", slot)
		if o2 := owner([]string{"r2", "r0", "r1"}, "job", slot); o2 != o {
			t.Fatalf("slot %s: owner %s, or %s in another order", slot, o, o2)
		}
		count[o]++
	}
	for _, r := range reps {
		if count[r] < 800 || count[r] > 1200 {
			t.Errorf("%s owns %d of 3000 slots, want about 1000: %v", r, count[r], count)
		}
	}
	g := &replicaGroup{}
	now := time.Now()
	if !g.owns("r0", "job", "s", now) {
		t.Error("a replica that knows no live replicas does not own a slot")
	}
	g.live.Store(&liveView{replicas: reps, until: now.Add(time.Second)})
	owners := 0
	for _, r := range reps {
		if g.owns(r, "job", "s", now) {
			owners++
		}
	}
	if owners != 1 {
		t.Errorf("%d replicas own slot s, want 1", owners)
	}
	if !g.owns("r9", "job", "s", now) {
		t.Error("a replica missing from the live list does not own a slot")
	}
	for _, r := range reps {
		if !g.owns(r, "job", "s", now.Add(2*time.Second)) {
			t.Errorf("%s does not own slot s once its reading is stale: the reading still decides", r)
		}
	}
}
