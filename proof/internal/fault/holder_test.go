package fault_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
	"github.com/wakuwaku-go/wakuwaku/proof/internal/fault"
)

// holderArgs are the arguments of the holder role.
type holderArgs struct {
	Conn      conn
	Namespace string
	TTL       time.Duration
	Name      string
	// Timer makes the work wait on a timer between writes, where the test
	// process pauses it; otherwise the test process pauses it while it
	// waits for the answer to its "holding" note.
	Timer bool
}

// holderRole takes a lock and runs work under lock.WhileHeld that writes to
// the resource with the version it read, and says "holding" (with its
// lease's deadline). Then it checks its context and writes again only while
// the context is live, as a user's work does before each write: once right
// after the note is answered, or, with Timer, every 20 ms. It notes what
// happened: "cancelled" when it found its context cancelled, "wrote" for a
// write after the note (Value 1 if accepted), "late" if its context was
// live after the lease's deadline had passed, "whileheld" with WhileHeld's
// error (Value 1 for ErrLeaseLost), and "release" with Release's result.
func holderRole(ctx context.Context, env *fault.Env) error {
	var a holderArgs
	if err := env.Args(&a); err != nil {
		return err
	}
	rdb := a.Conn.client()
	defer rdb.Close()
	db := lock.NewDB(rdb)
	l := lock.New[string](a.Namespace, a.TTL)
	key := l.Key(a.Name)
	rec := fault.NewRecorder(env.Child)
	link := env.Link
	var tok *lock.Token
	var version, hold uint64
	for {
		hold = rec.NewHold()
		var sent int64
		for tok == nil {
			var err error
			sent = fault.Now()
			if tok, err = l.TryLock(ctx, db, a.Name); err != nil {
				return fmt.Errorf("TryLock: %w", err)
			}
			time.Sleep(time.Millisecond)
		}
		v, entered, err := link.Enter(key, hold, fault.LeaseDeadline(sent, a.TTL))
		if err != nil {
			return err
		}
		if entered {
			version = v
			break
		}
		// The Enter arrived after the lease's deadline: the link or this
		// process stalled for a TTL (a busy machine). That hold writes
		// nothing; the lock is taken again, by another.
		tok = nil
	}
	// write checks ctx and writes if it is live; it reports false once ctx
	// was found cancelled.
	write := func(ctx context.Context) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, link.Note("cancelled", fault.Now(), context.Cause(ctx).Error())
		}
		checked := time.Now()
		if d := tok.Deadline(); !checked.Before(d) {
			if err := link.Note("late", int64(checked.Sub(d)), ""); err != nil {
				return false, err
			}
		}
		ok, v, err := link.Write(key, hold, version, fault.WallDeadline(tok.Deadline()))
		if err != nil {
			return false, err
		}
		if ok {
			version = v
		}
		return true, link.Note("wrote", map[bool]int64{false: 0, true: 1}[ok], "")
	}
	_, err := lock.WhileHeld(ctx, tok, func(ctx context.Context) (struct{}, error) {
		ok, v, err := link.Write(key, hold, version, fault.WallDeadline(tok.Deadline()))
		if err != nil || !ok {
			return struct{}{}, fmt.Errorf("first write: accepted %v, %v", ok, err)
		}
		version = v
		if err := link.Note("holding", fault.WallDeadline(tok.Deadline()), ""); err != nil {
			return struct{}{}, err
		}
		for {
			if a.Timer {
				select {
				case <-ctx.Done():
				case <-time.After(20 * time.Millisecond):
				}
			}
			live, err := write(ctx)
			if err != nil || !live {
				return struct{}{}, errors.Join(err, context.Cause(ctx))
			}
			if !a.Timer {
				<-ctx.Done()
			}
		}
	})
	lost := int64(0)
	if errors.Is(err, lock.ErrLeaseLost) {
		lost = 1
	}
	if err := link.Note("whileheld", lost, fmt.Sprint(err)); err != nil {
		return err
	}
	ok, err := tok.Release(context.WithoutCancel(ctx))
	released := int64(0)
	if ok {
		released = 1
	}
	return link.Note("release", released, fmt.Sprint(err))
}

// takeOver polls for the lock every millisecond until it is free, then takes
// it, enters the resource and writes; it returns the token and when the
// acquire that succeeded was called and returned. An acquire whose Enter
// came too late for the resource (this process stalled for a TTL) is
// dropped, and the polling goes on.
func takeOver(t *testing.T, db lock.DB, l lock.Lock[string], name string, res *fault.Resource, rec *fault.Recorder, within time.Duration) (*lock.Token, int64, int64) {
	t.Helper()
	ctx := t.Context()
	hold := rec.NewHold()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var tok *lock.Token
		call := fault.Now()
		tok, err := l.TryLock(ctx, db, name)
		ret := fault.Now()
		if err != nil {
			t.Fatalf("TryLock(%q) = %v", name, err)
		}
		if tok != nil {
			v, entered := res.Enter(l.Key(name), hold, fault.LeaseDeadline(call, l.TTL()))
			if !entered {
				t.Logf("takeOver(%q): the Enter came after the lease's deadline; polling on", name)
				hold = rec.NewHold()
				continue
			}
			if ok, _ := res.Write(l.Key(name), hold, v); !ok {
				t.Fatalf("the new holder's write was refused")
			}
			return tok, call, ret
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("nobody could take %q within %v", name, within)
	return nil, 0, 0
}

// TestPausedHolder pauses a process that holds a lock inside WhileHeld, with
// SIGSTOP, for twice the TTL, while the test process waits for the lock and
// takes it. The holder is paused either while its work waits for an answer
// from the network or while it sleeps on a timer. On resume, the paused
// work's context must already be cancelled when it checks it before its next
// write; its Release must report false and leave the new holder's key alone;
// and the resource must have accepted no stale write. A variant kills the
// holder with SIGKILL instead: the lock comes free within a TTL, and nothing
// stale is written either.
func TestPausedHolder(t *testing.T) {
	srv := redistest.Start(t)
	db := lock.NewDB(srv.Client(t))
	coord := fault.NewCoordinator(t)
	rec := fault.NewRecorder(0)
	const ttl = 400 * time.Millisecond
	l := lock.New[string]("paused", ttl)
	pauses, kills := fault.Pick(4, 40), fault.Pick(1, 5)

	atPoint := make(chan fault.Note)
	proceed := make(chan struct{})
	var timerRound atomic.Bool // read by the hook, in the coordinator's goroutine
	coord.OnNote("holding", func(n fault.Note) {
		select {
		case atPoint <- n:
		case <-t.Context().Done():
			return
		}
		if !timerRound.Load() { // pause while the child waits for this answer
			select {
			case <-proceed:
			case <-t.Context().Done():
			}
		}
	})

	began := time.Now()
	var wrote, late, takeovers, stalled int
	var margin time.Duration = 1 << 62
	for round := range pauses + kills {
		kill := round >= pauses
		timerRound.Store(!kill && round%2 == 1)
		child := round + 1
		name := fmt.Sprintf("job-%d", round)
		c := fault.Spawn(t, coord, child, "holder", holderArgs{
			Conn: conn{Addr: srv.Addr()}, Namespace: "paused", TTL: ttl, Name: name, Timer: timerRound.Load(),
		})
		var n fault.Note
		select {
		case n = <-atPoint:
		case <-time.After(30 * time.Second):
			t.Fatalf("round %d: the holder never said it was holding\n%s", round, c.Output())
		}
		if kill {
			c.Kill(t)
		} else {
			c.Pause(t)
		}
		pausedAt := time.Now()
		if !timerRound.Load() {
			proceed <- struct{}{}
		}

		tok, _, ret := takeOver(t, db, l, name, coord.Resource, rec, 3*ttl)
		takeovers++
		if ret < n.Value {
			t.Errorf("round %d: the lock was taken over at %d, before the holder's deadline %d", round, ret, n.Value)
		}
		margin = min(margin, time.Duration(ret-n.Value))
		// The new holder keeps its lease while the paused one resumes.
		release := make(chan struct{})
		kept := make(chan error, 1)
		var stall time.Duration
		stopStalls := watchStalls(&stall)
		go func() {
			_, err := lock.WhileHeld(t.Context(), tok, func(ctx context.Context) (int, error) {
				select {
				case <-release:
				case <-ctx.Done():
				}
				return 0, nil
			})
			kept <- err
		}()
		if !kill {
			time.Sleep(time.Until(pausedAt.Add(2 * ttl)))
			c.Resume(t)
			c.Wait(t, 30*time.Second)
		}
		close(release)
		err := <-kept
		stopStalls()
		ok, rerr := tok.Release(t.Context())
		switch {
		case err != nil && stall >= ttl/3:
			// Its heartbeats came late because this process did not run
			// (a busy machine): the round tells nothing of the paused
			// holder's Release, which the others check.
			stalled++
			t.Logf("round %d: the new holder lost its lease (%v) while this process stalled for %v", round, err, stall.Round(time.Millisecond))
		case err != nil:
			t.Errorf("round %d: the new holder lost its lease: %v (this process stalled for %v at most)", round, err, stall.Round(time.Millisecond))
		case !ok || rerr != nil:
			t.Errorf("round %d: the new holder's Release = %v, %v, want true", round, ok, rerr)
		}
		if kill {
			continue
		}

		notes := map[string]fault.Note{}
		for _, n := range coord.Notes("") {
			if n.Child == child {
				notes[n.What] = n
			}
		}
		if _, ok := notes["cancelled"]; !ok {
			t.Errorf("round %d: the resumed work never found its context cancelled", round)
		}
		if n, ok := notes["late"]; ok {
			late++
			t.Errorf("round %d (timer %v): the resumed work found its context live %v after its lease's deadline", round, timerRound.Load(), time.Duration(n.Value))
		}
		if n, ok := notes["wrote"]; ok && !timerRound.Load() {
			wrote++
			t.Errorf("round %d: the resumed work wrote (accepted: %v)", round, n.Value == 1)
		}
		if n := notes["whileheld"]; n.Value != 1 {
			t.Errorf("round %d: WhileHeld returned %q, want ErrLeaseLost", round, n.Text)
		}
		if n, ok := notes["release"]; !ok || n.Value != 0 {
			t.Errorf("round %d: the paused holder's Release = %v (%s), want false", round, n.Value == 1, n.Text)
		}
	}
	res := coord.Resource.Figures()
	if res.StaleAccepted != 0 {
		t.Errorf("the resource accepted %d stale writes, want 0", res.StaleAccepted)
	}
	fault.Publish(t, fault.Figures{
		Scenario:       "paused holder",
		Seconds:        time.Since(began).Seconds(),
		Acquired:       takeovers,
		Faults:         fmt.Sprintf("%d SIGSTOP of a holder inside WhileHeld for 2x TTL (%v), %d SIGKILL", pauses, ttl, kills),
		WritesAccepted: res.Accepted,
		StaleAccepted:  res.StaleAccepted,
		StaleRefused:   res.StaleRefused,
		EntersLate:     res.EntersLate,
		Notes: []string{
			fmt.Sprintf("resumed work found its context cancelled before writing in %d of %d pauses (live after its deadline in %d)", pauses-late, pauses, late),
			fmt.Sprintf("smallest gap between the paused holder's deadline and the takeover: %v", margin),
			fmt.Sprintf("%d rounds in which the new holder lost its lease while this process stalled for a third of the TTL or more", stalled),
			stale(t, res),
		},
	})
}
