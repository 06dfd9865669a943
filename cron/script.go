package cron

import "github.com/wakuwaku-go/wakuwaku/internal/redisscript"

// The scripts that keep a leased job's record: the claim, the heartbeat,
// the completion and the operators' commands of PROTOCOL.md, whose rows
// they cite. Each is one round trip. KEYS[1] is the record, a hash; a
// duration policy's claim also gets the job's lease key (the Rust crate's)
// as KEYS[2]. Times are milliseconds of the server's clock (TIME), so that
// the replicas' clocks never decide who runs.

// The scripts are written for the server's time, which every replica's
// claims spend: each reads the fields it needs with one HMGET into
// locals, and writes with as few HSETs as its path allows, their fields
// spelled out (a Lua table built to hold them costs more than the
// commands). A loop or a table on the path of every run is a cost paid
// once per replica per slot.

// recordPrelude defines now, the record R, and keep.
const recordPrelude = `
local R = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- keep makes the record live ms more at least (C2): never less than it
-- was to live already, which another replica may have asked for. It
-- returns the TTL the record has now.
local function keep(ms)
	local ttl = redis.call('PTTL', R)
	if ttl < ms then
		redis.call('PEXPIRE', R, ms)
		return ms
	end
	return ttl
end
`

// runPrelude defines stateAfter and ended, which close the run in
// progress: C1 and R12. The script that includes it reads the fields they
// use (run, run.by, run.since, run.slot, run.try, run.why, slot) into the
// locals of those names first.
const runPrelude = `
-- stateAfter is the state the run's end leaves its slot in (R12, C1):
-- false for a requested run, or a run of a slot the record no longer names.
local function stateAfter(outcome, max)
	if runWhy == 'request' or slot ~= runSlot then
		return false
	elseif outcome == 'ok' then
		return 'done'
	elseif tonumber(runTry) < max then
		return 'open'
	end
	return 'failed'
end
-- ended writes the end of the run in progress, with extra fields: last,
-- and fail unless it succeeded; then frees the run lease.
local function ended(outcome, at, err, ...)
	if outcome == 'ok' then
		redis.call('HSET', R, 'last.slot', runSlot, 'last.by', runBy, 'last.start', runSince, 'last.end', at,
			'last.outcome', outcome, 'last.try', runTry, 'last.why', runWhy, ...)
	else
		redis.call('HSET', R, 'last.slot', runSlot, 'last.by', runBy, 'last.start', runSince, 'last.end', at,
			'last.outcome', outcome, 'last.try', runTry, 'last.why', runWhy,
			'fail.slot', runSlot, 'fail.by', runBy, 'fail.start', runSince, 'fail.end', at,
			'fail.outcome', outcome, 'fail.try', runTry, 'fail.why', runWhy, 'fail.error', err, ...)
	end
	redis.call('HDEL', R, 'run', 'run.by', 'run.since', 'run.until', 'run.slot', 'run.try', 'run.why')
	run, runBy, runSince, runUntil, runSlot, runTry, runWhy = false, false, false, false, false, false, false
end
`

// A record hash is small enough for the server to keep as a listpack,
// which it scans for each field a command names: a script that reads a
// field it does not need pays for it. The claim reads the fields of its
// common paths first, and the others only on the paths that need them.
const claimRead = `
local run, runUntil, slot, slotAt, slotState, paused, want, nxt, seen, lastStart, lastEnd = unpack(redis.call('HMGET', R,
	'run', 'run.until', 'slot', 'slot.at', 'slot.state', 'paused', 'want', 'next', 'seen', 'last.start', 'last.end'))
local runBy, runSince, runSlot, runTry, runWhy, slotTries, slotRetry, slotLease
local readMore = false
-- more reads the fields of the run in progress and of an open slot.
local function more()
	if not readMore then
		readMore = true
		runBy, runSince, runSlot, runTry, runWhy, slotTries, slotRetry, slotLease = unpack(redis.call('HMGET', R,
			'run.by', 'run.since', 'run.slot', 'run.try', 'run.why', 'slot.tries', 'slot.retry', 'slot.lease'))
	end
end
`

// claimScript is every claim of PROTOCOL.md: E1 tick, E2 retry, E3
// follow-up, E4 catch-up, E5 request and E6 hello, after C1 and C2. ARGV:
// 1 mode (tick, retry, follow, catchup, request, hello); 2 the slot's id S
// (a Cron slot's key; a duration policy's, for retry and follow, the id a
// claim answered; else empty); 3 a Cron slot's start in ms; 4 the run's
// token; 5 the replica; 6 the run lease in ms; 7 how long the record must
// live at least, in ms; 8 the attempts a slot gets; 9 a duration policy's
// lease TTL in ms, 10 its new token and 11 this replica's previous one; 12
// the next tick in ms (or empty); 13 the catch-up window in ms; 14 a
// duration policy's interval in ms.
//
// Reply: {code, ms, text, slot id}. Codes: 1 run (ms: the attempt, text:
// the trigger); 2 the run lease is held for ms more (text: same, the run
// of S; mine, another run of this replica; other); 3 S ran, or is past,
// or its lease is held by hand; 4 paused; 5 S waits ms for its next
// attempt; 6 nothing to do, quietly; 7 S used up its attempts.
var claimScript = redisscript.New(claimSrc)

const claimSrc = recordPrelude + claimRead + runPrelude + `
local mode, S, replica, max = ARGV[1], ARGV[2], ARGV[5], tonumber(ARGV[8])
local existed = seen
-- C2: the record says who saw it last (and when it was born, if new, and
-- the next tick announced, if earlier), with the answer's own fields, in
-- one HSET; then it lives long enough.
local announce = ARGV[12] ~= '' and (not nxt or tonumber(nxt) <= now or tonumber(ARGV[12]) < tonumber(nxt))
local function seenWith(...)
	if announce then
		if existed then
			redis.call('HSET', R, 'seen', now, 'seen.by', replica, 'next', ARGV[12], ...)
		else
			redis.call('HSET', R, 'born', now, 'seen', now, 'seen.by', replica, 'next', ARGV[12], ...)
		end
	elseif existed then
		redis.call('HSET', R, 'seen', now, 'seen.by', replica, ...)
	else
		redis.call('HSET', R, 'born', now, 'seen', now, 'seen.by', replica, ...)
	end
	keep(tonumber(ARGV[7]))
end
local function answer(r, ...)
	seenWith(...)
	return r
end
-- C1: a run whose lease ended is over.
if run and tonumber(runUntil) < now then
	more()
	lastStart, lastEnd = runSince, runUntil
	local state = stateAfter('lost', max)
	if state == 'open' then
		slotState, slotRetry = state, now
		ended('lost', runUntil, 'the run lease expired: its replica died or lost Redis', 'last.run', '', 'slot.state', state, 'slot.retry', now)
	elseif state then
		slotState = state
		ended('lost', runUntil, 'the run lease expired: its replica died or lost Redis', 'last.run', '', 'slot.state', state)
	else
		ended('lost', runUntil, 'the run lease expired: its replica died or lost Redis', 'last.run', '')
	end
end
-- R10, and E4 below: a replica that starts follows up (E3) the record's
-- Cron slot if a run of it may yet fail with attempts left or it waits for
-- another attempt, since the replica whose timer would have claimed it may
-- be the one that restarted.
local function followUpAtStart()
	if max > 1 and run and runWhy ~= 'request' and runSlot == slot then
		return answer({2, tonumber(runUntil) - now, 'same', slot})
	elseif slotState == 'open' and tonumber(slotTries or '0') < max then
		return answer({5, math.max(tonumber(slotRetry or '0') - now, 1), '', slot})
	end
	return answer({6})
end
if mode == 'hello' then
	if #KEYS == 1 and slot then
		more()
		return followUpAtStart()
	end
	return answer({6}) -- R10
end
local running = run
-- start answers a run of slot: the run lease, with extra fields.
local function start(slot, try, why, ...)
	return answer({1, try, why, slot}, 'run', ARGV[4], 'run.by', replica, 'run.since', now,
		'run.until', now + tonumber(ARGV[6]), 'run.slot', slot, 'run.try', try, 'run.why', why, ...)
end
-- R9: a request runs when nothing holds the run lease.
local function request()
	if running or not want then
		return nil
	end
	redis.call('HDEL', R, 'want', 'want.by')
	return start(slot or '', 1, 'request')
end
if mode == 'request' then
	local r = request()
	if r then
		return r
	elseif running then
		return answer({2, tonumber(runUntil) - now, 'other', ''})
	end
	return answer({6})
end
-- Which slot a duration policy's tick or catch-up is for: D1 to D4.
local fresh = false
if #KEYS == 2 and (mode == 'tick' or mode == 'catchup') then
	more()
	local held = redis.call('GET', KEYS[2])
	if not held then
		fresh = true -- D1
	elseif held == slotLease then
		if mode == 'tick' and held == ARGV[11] and slotState ~= 'open' then
			fresh = true -- D3
		else
			S = slot -- D2
		end
	elseif mode == 'tick' then
		return request() or answer({3, 0, '', ''}) -- D4
	else
		return answer({6})
	end
end
local sid = S or ''
-- R1, R2: the run lease is held.
if running then
	more()
	if mode == 'catchup' then
		if not fresh and slot == S then
			return followUpAtStart()
		end
		return answer({6})
	end
	local of = 'other'
	if not fresh and runWhy ~= 'request' and runSlot == S and slot == S then
		of = 'same'
	elseif runBy == replica then
		of = 'mine'
	end
	return answer({2, tonumber(runUntil) - now, of, sid})
end
-- R3: paused.
if paused then
	if mode == 'tick' then
		return request() or answer({4, 0, '', sid})
	elseif mode == 'catchup' then
		return answer({6})
	end
	return answer({4, 0, '', sid})
end
-- The state of S.
local state
if fresh then
	state = 'none'
elseif slot == S then
	state = slotState
	if state == 'open' then
		more()
		if tonumber(slotTries or '0') >= max then
			-- Fewer attempts than when it opened (a rolling deploy).
			state = 'failed'
			redis.call('HSET', R, 'slot.state', state)
		elseif tonumber(slotRetry or '0') > now then
			state = 'waiting'
		else
			state = 'due'
		end
	end
elseif #KEYS == 1 and (not slot or tonumber(ARGV[3]) > tonumber(slotAt or '0')) then
	state = 'none'
else
	state = 'past'
end
-- open opens slot S at at, and starts its first attempt.
local function open(S, at, why)
	if #KEYS == 2 then
		redis.call('SET', KEYS[2], ARGV[10], 'PX', ARGV[9])
		return start(S, 1, why, 'slot', S, 'slot.at', at, 'slot.state', 'open', 'slot.tries', 1, 'slot.retry', 0, 'slot.lease', ARGV[10])
	end
	return start(S, 1, why, 'slot', S, 'slot.at', at, 'slot.state', 'open', 'slot.tries', 1, 'slot.retry', 0)
end
if state == 'none' then -- R4
	if mode == 'tick' then
		if #KEYS == 2 then
			return open(tostring(now), now, 'schedule')
		end
		-- R2: the last run began before S and ended after S began: it held
		-- the job at S's start, however late this tick comes.
		local at = tonumber(ARGV[3])
		if lastEnd and tonumber(lastEnd) > at and tonumber(lastStart) < at then
			return answer({2, 0, 'other', sid})
		end
		return open(S, ARGV[3], 'schedule')
	elseif mode ~= 'catchup' or not existed then
		return answer({6})
	end
	local window = tonumber(ARGV[13])
	local born = redis.call('HMGET', R, 'born')[1]
	if #KEYS == 1 then
		local at = tonumber(ARGV[3])
		if (born and at < tonumber(born)) or now - at > window then
			return answer({6})
		end
		return open(S, ARGV[3], 'catch-up')
	end
	local due = tonumber(slotAt or born or now) + tonumber(ARGV[14])
	if now < due or now - due > window then
		return answer({6})
	end
	return open(tostring(now), now, 'catch-up')
elseif mode == 'catchup' then
	if state == 'due' or state == 'waiting' then
		return followUpAtStart()
	end
	return answer({6})
elseif state == 'due' then -- R5
	local tries = tonumber(slotTries or '0') + 1
	return start(S, tries, 'retry', 'slot.tries', tries)
elseif state == 'waiting' then -- R6
	local wait = tonumber(slotRetry) - now
	if mode == 'tick' then
		return request() or answer({5, wait, '', sid})
	end
	return answer({5, wait, '', sid})
elseif mode ~= 'tick' then
	return answer({6})
elseif state == 'failed' then -- R8
	return request() or answer({7, 0, '', sid})
end
return request() or answer({3, 0, '', sid}) -- R7`

// completeScript is R12, the completion of the run whose token is
// ARGV[1]: its outcome (ok, error, panic, lost, timeout), its error text,
// the attempts a slot gets, the back-off in ms before the slot's next
// attempt, how long the record must live at least, and the next tick in ms
// (or empty). It records the run even past its lease's end if no claim
// has recorded it lost (C1 is not applied here: the run is this script's
// own). Reply: {0} if the run no longer holds the run lease, else {1,
// state of its slot ("" for a requested run), 1 if a request waits}.
//
// It also keeps the job's history (PROTOCOL.md, the record): KEYS[2], a
// list of the last ARGV[8] runs, newest first, to which it adds the run
// that ended (ARGV[9]: when it was due, in ms of its replica's clock), and
// first the run that a claim recorded lost since the last completion, if
// any; the list lives as long as the record. ARGV[10] is the job's
// schedule, as the replica states it.
//
// Sent again for a run it recorded already (R18: its first answer went
// unacknowledged by the replicas, or was lost), it finds the run's token
// in last.run, answers as it did, and writes last.run again: a write, so
// that a WAIT after it covers the record as the server has it.
var completeScript = redisscript.New(recordPrelude + `
local run, runBy, runSince, runSlot, runTry, runWhy, slot, want, nxt, lastOutcome, histLast = unpack(redis.call('HMGET', R,
	'run', 'run.by', 'run.since', 'run.slot', 'run.try', 'run.why', 'slot', 'want', 'next', 'last.outcome', 'hist.last'))
if run ~= ARGV[1] then
	local lastRun, lastSlot, lastWhy, slotState = unpack(redis.call('HMGET', R, 'last.run', 'last.slot', 'last.why', 'slot.state'))
	if lastRun ~= ARGV[1] then
		return {0}
	end
	redis.call('HSET', R, 'last.run', lastRun)
	local state = ''
	if lastWhy ~= 'request' and lastSlot == slot then
		state = slotState or ''
	end
	local w = 0
	if want then
		w = 1
	end
	return {1, state, w}
end
local runUntil` + runPrelude + `
local H, outcome, max = KEYS[2], ARGV[2], tonumber(ARGV[4])
-- A run is named by its slot, attempt and start: two runs can start in one
-- millisecond.
local function name(slot, try, start)
	return tostring(slot or '') .. ' ' .. tostring(try or '') .. ' ' .. tostring(start or '')
end
-- A run that C1 recorded lost since the last completion enters the history
-- before this one: it is in last, and not the history's newest.
if lastOutcome == 'lost' then
	local p = redis.call('HMGET', R, 'last.start', 'last.end', 'last.slot', 'last.by', 'last.why', 'last.try', 'fail.error')
	if name(p[3], p[6], p[1]) ~= histLast then
		redis.call('LPUSH', H, cjson.encode({slot = p[3], by = p[4], why = p[5], try = p[6], due = '', start = p[1],
			['end'] = p[2], outcome = 'lost', error = p[7] or ''}))
	end
end
redis.call('LPUSH', H, cjson.encode({slot = runSlot, by = runBy, why = runWhy, try = runTry,
	due = ARGV[9], start = runSince, ['end'] = tostring(now), outcome = outcome, error = ARGV[3]}))
redis.call('LTRIM', H, 0, tonumber(ARGV[8]) - 1)
local hist = name(runSlot, runTry, runSince)
local state = stateAfter(outcome, max)
local announce = ARGV[7] ~= '' and (not nxt or tonumber(nxt) <= now or tonumber(ARGV[7]) < tonumber(nxt))
-- One HSET: the run, the slot's new state, and the record's own fields.
local function finish(err, ...)
	if announce then
		ended(outcome, now, err, 'next', ARGV[7], 'every', ARGV[10], 'hist.last', hist, 'last.run', ARGV[1], ...)
	else
		ended(outcome, now, err, 'every', ARGV[10], 'hist.last', hist, 'last.run', ARGV[1], ...)
	end
end
if outcome == 'ok' then
	if state then
		finish('', 'slot.state', state, 'good', now)
	else
		finish('', 'good', now)
	end
elseif state == 'open' then
	finish(ARGV[3], 'slot.state', state, 'slot.retry', now + tonumber(ARGV[5]))
elseif state then
	finish(ARGV[3], 'slot.state', state)
else
	finish(ARGV[3])
end
redis.call('PEXPIRE', H, keep(tonumber(ARGV[6])))
local w = 0
if want then
	w = 1
end
return {1, state or '', w}`)

// heartbeatScript is R11: it extends the run lease of the run whose token
// is ARGV[1] by ARGV[2] ms, and the record's life to ARGV[3] ms at least.
// 1 if it did, 0 if the run no longer holds the run lease.
var heartbeatScript = redisscript.New(recordPrelude + `
if redis.call('HMGET', R, 'run')[1] ~= ARGV[1] then
	return 0
end
redis.call('HSET', R, 'run.until', now + tonumber(ARGV[2]))
keep(tonumber(ARGV[3]))
return 1`)

// controlScript is R15 and R16: an operator's command. ARGV[1] is pause,
// resume or run, ARGV[2] who asks. -1 if the job has no record, else 1.
// A run-now is published by the caller after it (R16), on the channel's
// own node of a sharded client such as a Ring, where a script's PUBLISH
// would reach only the record's.
var controlScript = redisscript.New(recordPrelude + `
if redis.call('EXISTS', R) == 0 then
	return -1
end
local op = ARGV[1]
if op == 'pause' then
	redis.call('HSET', R, 'paused', now, 'paused.by', ARGV[2])
elseif op == 'resume' then
	redis.call('HDEL', R, 'paused', 'paused.by')
else
	redis.call('HSET', R, 'want', now, 'want.by', ARGV[2])
end
return 1`)
