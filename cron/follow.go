package cron

import (
	"context"
	"log/slog"
	"strings"
	"time"
)

// This file holds E14 of PROTOCOL.md, the follow notice: a replica whose
// start ran a Cron slot that the other replicas ticked before (its late
// tick of a slot still in its claim window, or its catch-up) tells them,
// so that the slot's next attempt does not hang on the one replica that
// knows of its run.

// followPrefix begins a follow notice on the run-now channel. A lease name
// holds no '{', so no run-now request begins so; a replica of an earlier
// release finds no job of that name and ignores it.
const followPrefix = "{follow}"

// followNotice is the payload of a follow notice of the Cron slot whose
// key is id, of the job leased as name. A slot's key holds no '|'.
func followNotice(id, name string) string {
	return followPrefix + id + "|" + name
}

// parseFollow returns the slot key and lease name of a follow notice.
func parseFollow(payload string) (id, name string, ok bool) {
	rest, ok := strings.CutPrefix(payload, followPrefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "|")
}

// offTick reports whether a's claim, which started a run, ran a Cron slot
// that the other replicas may have ticked without this one: a catch-up, a
// tick that came later than a grace period after its slot began (the
// startup run's late tick of a slot still in its claim window), or a look
// after an outage that found the slot unclaimed (the others' looks may
// have come before it, while Redis had lost the record: seed 21393). Only
// a slot with attempts to spare needs anyone to follow it.
func offTick(a *runArgs, s *jobState) bool {
	if !s.shared || s.Attempts < 2 || a.tick.Attempt != 1 {
		return false
	}
	switch a.mode {
	case modeCatchUp, modeLook, modeAfterRun:
		return true
	case modeTick:
		return a.tick.Run == 1 && a.tick.Started.Sub(a.tick.Slot.Start) > lookGrace(s.base)
	}
	return false
}

// announceFollow publishes a follow notice of a's slot (E14), one
// command, on the path of a run that offTick picked. If it fails, the
// slot is followed only by this replica, as before notices: logged at
// Debug, the run goes on.
func (r *Runtime) announceFollow(ctx context.Context, a *runArgs, s *jobState) {
	if err := announce(ctx, s.C, followNotice(slotKey(&a.tick), s.Name)); err != nil {
		r.rep.log.LogAttrs(ctx, slog.LevelDebug, "cron job's follow notice was not published; only this replica follows its slot",
			slog.String("job", a.tick.Job), slog.Any("error", err))
	}
}

// heardFollow is R19, a follow notice's arrival (E14): e plans a follow-up of
// the slot whose key is id, a run lease from now (E3, which R1 plans
// again while the run holds its lease, and R5 makes the next attempt if
// the run was lost). r.mu is held.
func (r *Runtime) heardFollow(e *entry, id string) {
	if e.admit == nil || e.admit.state == nil {
		return
	}
	s := e.admit.state
	if !s.shared || s.Attempts < 2 {
		return
	}
	slot, ok := slotNamed(e.every.Interval, id, r.now())
	if !ok {
		return // not one of the latest slots of this release's schedule
	}
	r.planLook(e, s, modeFollow, slot, id, s.RunTTL+time.Millisecond)
}
