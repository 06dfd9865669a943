package record

import "github.com/wakuwaku-go/wakuwaku/internal/redisscript"

// The scripts that keep a leased job's record: the claim, the heartbeat,
// the completion and the operators' commands of PROTOCOL.md, whose rows
// they cite. Each is one round trip. KEYS[1] is the record, a hash, and
// KEYS[2] its history, a list; a duration policy's claim also gets the
// job's lease key (the Rust crate's) as KEYS[3]. Times are milliseconds of
// the server's clock (TIME), so that the replicas' clocks never decide who
// runs.

// The scripts are written for the server's time, which every replica's
// claims spend. A record is a handful of fields, each of which packs what
// one part of the protocol needs, separated by '|' (PROTOCOL.md, the
// record): a hash of few fields is cheap to read and to write, since the
// server scans its fields for each one a command names. Each script reads
// the fields it needs with one HMGET into locals, splits a field with one
// string.match, and writes with one HSET on its common path. A loop, a
// table or a closure on the path of every run is a cost paid once per
// replica per slot.

// recordPrelude defines now, the record R, its history H and keep.
const recordPrelude = `
local R, H = KEYS[1], KEYS[2]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- sameExpiry makes the history expire when the record does, to the
-- millisecond: a TTL read from one key and set on another would add the
-- time between the two calls, which Redis reads from its clock at each.
-- Redis 6.2 has no PEXPIRETIME (pcall answers its error as a table
-- instead of stopping the script): there the history gets the record's
-- TTL, and may outlive it by the time between the two calls.
local function sameExpiry()
	local at = redis.pcall('PEXPIRETIME', R)
	if type(at) == 'number' then
		if at > 0 then
			redis.call('PEXPIREAT', H, at)
		end
		return
	end
	local ttl = redis.call('PTTL', R)
	if ttl > 0 then
		redis.call('PEXPIRE', H, ttl)
	end
end
-- keep makes the record and its history live ms more at least (C2), never
-- less than they were to live already, which another replica may have
-- asked for; a quarter more than asked, so that most calls find it long
-- enough.
local function keep(ms)
	local ttl = redis.call('PTTL', R)
	if ttl < ms then
		ttl = ms + math.floor(ms / 4)
		redis.call('PEXPIRE', R, ttl)
		sameExpiry()
	end
end
`

// The packed fields, and the patterns that split them. The last part of
// each may hold any byte ('|' too): a replica's name, a lease's token.
//
//	run  = token|since|until|try|why|slot|beat|by
//	slot = id|at|state|tries|retry|lease
//	last = end|start|slot|try|why|outcome|token|by
//	fail = end|start|slot|try|why|outcome|by   (and fail.error)
//	skip = at|reason|id|token|by
//	seen, paused, want = ms|by
const packPatterns = `
local runPat = '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$'
local slotPat = '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$'
`

// runPrelude defines stateAfter and ended, which close the run in
// progress: R12, and C1 (stateAfter; it writes its own fields). The script
// that includes it has the run's parts (runTok, runSince, runSlot, runTry,
// runWhy, runBy) and the slot's id in the locals of those names.
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
-- ended writes the end of the run in progress, ended at at, with extra
-- fields: last, and fail unless it succeeded; and frees the run lease.
-- token is the run's, for a completion (R18), or empty.
local function ended(outcome, at, err, token, ...)
	local head = at .. '|' .. runSince .. '|' .. runSlot .. '|' .. runTry .. '|' .. runWhy .. '|' .. outcome .. '|'
	if outcome == 'ok' then
		redis.call('HSET', R, 'run', '', 'last', head .. token .. '|' .. runBy, ...)
	else
		redis.call('HSET', R, 'run', '', 'last', head .. token .. '|' .. runBy, 'fail', head .. runBy, 'fail.error', err, ...)
	end
end
`

// claimScript is every claim of PROTOCOL.md: E1 tick, E2 retry, E3
// follow-up, E4 catch-up, E5 request and E6 hello, after C1, C2 and C3
// (a claim sent again answers as it did). ARGV:
// 1 mode (tick, early, retry, follow, catchup, request, hello, skip; early
// is a tick of a Cron slot before its ticks are due); 2 the slot's id S
// (a Cron slot's key; a duration policy's, for retry and follow, the id a
// claim answered; else empty); 3 a Cron slot's start in ms; 4 the run's
// token; 5 the replica; 6 the run lease in ms; 7 how long the record must
// live at least, in ms; 8 the attempts a slot gets; 9 a duration policy's
// lease TTL in ms, 10 its new token and 11 this replica's previous one; 12
// the next tick in ms (or empty); 13 the catch-up window in ms; 14 a
// duration policy's interval in ms; 15 how many runs the history keeps;
// 16 when a Cron slot's tick is due in ms: its start, plus the job's
// offset into it with a spread (interval.Interval.WithSpread).
//
// A skip claim (mode skip) is a tick of a Cron slot whose replica's own run
// of the job went on when it came: it records S skipped if a run holds
// the run lease (R2, R20), and answers 6 if not, never 1.
//
// Reply: {code, ms, text, slot id, skip, fence}. Codes: 1 run (ms: the attempt,
// text: the trigger); 2 the run lease is held for ms more (text: same, the
// run of S; mine, another run of this replica; other); 3 S ran, or is
// past, or its lease is held by hand; 4 paused; 5 S waits ms for its next
// attempt; 6 nothing to do, quietly; 7 S used up its attempts; 8 S is
// recorded skipped (R20; text: why, ms: 1 if this claim recorded it, else
// 0). With text early, 2 and 4 are R2 and R3 refusing a tick that came
// before S's ticks are due, by the replica's clock or the server's, ms
// before they are: no skip is recorded. skip, if present and not empty,
// is the reason of the skip this claim recorded while it served a request.
// A run's reply (code 1) also has fence, its fencing number (F1), after
// skip (empty if none).
var claimScript = redisscript.New(ClaimSrc)

// ClaimSrc is the claim's source, exported as CompleteSrc and
// HeartbeatSrc are, for the tests that tell the scripts' commands apart by
// their SHA1s.
const ClaimSrc = recordPrelude + packPatterns + claimRead + runPrelude + claimRest

// claimRead reads the fields of the claim's paths, and splits them.
const claimRead = `
local L = KEYS[3]
local mode, S, replica, max = ARGV[1], ARGV[2], ARGV[5], tonumber(ARGV[8])
-- A tick before its Cron slot's ticks are due (a start's) is a tick that
-- records no skip (R20).
local early = mode == 'early'
if early then
	mode = 'tick'
end
local run, slot, paused, want, nxt, seen, last, skip, fence = unpack(redis.call('HMGET', R,
	'run', 'slot', 'paused', 'want', 'next', 'seen', 'last', 'skip', 'fence'))
local runTok, runSince, runUntil, runTry, runWhy, runSlot, runBeat, runBy
if run and run ~= '' then
	runTok, runSince, runUntil, runTry, runWhy, runSlot, runBeat, runBy = string.match(run, runPat)
	if not runTok then
		-- The previous release's run, without beat (PROTOCOL.md, the record).
		runTok, runSince, runUntil, runTry, runWhy, runSlot, runBy = string.match(run, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|([^|]*)|(.*)$')
	end
end
if not runTok then
	run = false
end
local slotAt, slotState, slotTries, slotRetry, slotLease
if slot then
	slot, slotAt, slotState, slotTries, slotRetry, slotLease = string.match(slot, slotPat)
	if not slot then
		-- A record of the earlier layout, a field per part: it names no
		-- slot and no run that this layout can read; its fields go.
		redis.call('HDEL', R, 'run.by', 'run.since', 'run.until', 'run.slot', 'run.try', 'run.why', 'slot.at',
			'slot.state', 'slot.tries', 'slot.retry', 'slot.lease', 'paused.by', 'want.by', 'seen.by', 'hist.last',
			'last.run', 'last.slot', 'last.by', 'last.start', 'last.end', 'last.outcome', 'last.try', 'last.why',
			'fail.slot', 'fail.by', 'fail.start', 'fail.end', 'fail.outcome', 'fail.try', 'fail.why')
	end
end
if paused == '' then
	paused = false
end
if want == '' then
	want = false
end
`

const claimRest = `
local existed = seen
local lastStart, lastEnd
-- C2: the record says who saw it last (and when it was born, if new, and
-- the next tick announced, if earlier), with the answer's own fields, in
-- one HSET; then it lives long enough.
local announce = ARGV[12] ~= '' and (not nxt or tonumber(nxt) <= now or tonumber(ARGV[12]) < tonumber(nxt))
local skipNew -- the reason of the skip this claim recorded (R20)
local function answer(r, ...)
	if skipNew then
		r[5] = skipNew
	end
	local sn = now .. '|' .. replica
	if announce then
		if existed then
			redis.call('HSET', R, 'seen', sn, 'next', ARGV[12], ...)
		else
			redis.call('HSET', R, 'born', now, 'seen', sn, 'next', ARGV[12], ...)
		end
	elseif existed then
		redis.call('HSET', R, 'seen', sn, ...)
	else
		redis.call('HSET', R, 'born', now, 'seen', sn, ...)
	end
	keep(tonumber(ARGV[7]))
	return r
end
-- packSlot is the slot field of slot S.
local function packSlot(S, at, state, tries, retry, lease)
	return S .. '|' .. at .. '|' .. state .. '|' .. tries .. '|' .. retry .. '|' .. (lease or '')
end
-- C1: a run whose lease ended is over.
if run and tonumber(runUntil) < now then
	lastStart, lastEnd = runSince, runUntil
	-- It ended when it was last known alive: its beat. A seventh part that
	-- is no beat is the previous release's run whose replica's name holds
	-- a '|' (PROTOCOL.md, the record): it ends at its lease's end.
	local alive, since, err = tonumber(runBeat), tonumber(runSince), 'the run lease expired: its replica died or lost Redis'
	if alive and since and alive > since and alive <= tonumber(runUntil) then
		err = 'the run lease expired ' .. (tonumber(runUntil) - alive) ..
			' ms after its last heartbeat: its replica died or lost Redis'
	elseif alive and alive == since then
		err = 'the run lease expired ' .. (tonumber(runUntil) - alive) ..
			' ms after its start, and no heartbeat came: its replica died or lost Redis'
	else
		if runBeat then
			runBy = runBeat .. '|' .. runBy
		end
		alive = runUntil
	end
	-- last.end is when the run stopped holding the job (R2); fail.end and
	-- the history's end, when it was last known alive.
	local state = stateAfter('lost', max)
	local head = '|' .. runSince .. '|' .. runSlot .. '|' .. runTry .. '|' .. runWhy .. '|lost|'
	local fields = {'run', '', 'last', runUntil .. head .. '|' .. runBy, 'fail', alive .. head .. runBy, 'fail.error', err}
	if state == 'open' then
		slotState, slotRetry = state, now
		redis.call('HSET', R, 'slot', packSlot(slot, slotAt, state, slotTries, now, slotLease), unpack(fields))
	elseif state then
		slotState = state
		redis.call('HSET', R, 'slot', packSlot(slot, slotAt, state, slotTries, slotRetry, slotLease), unpack(fields))
	else
		redis.call('HSET', R, unpack(fields))
	end
	-- The lost run joins the history at once.
	if redis.call('LPUSH', H, cjson.encode({slot = runSlot, by = runBy, why = runWhy, try = runTry, due = '',
		start = runSince, ['end'] = tostring(alive), outcome = 'lost', error = err})) == 1 then
		sameExpiry()
	else
		redis.call('LTRIM', H, 0, tonumber(ARGV[15]) - 1)
	end
	run = false
end
-- C3: this claim, sent again (go-redis sends a command or a pipeline again
-- after a read error or a timeout, though Redis executed it), finds the run
-- it started by its token, new for each claim: it answers as it did.
if run and runTok == ARGV[4] then
	-- A skip recorded by the same claim (R20 with R9: a paused slot whose
	-- tick served a request) is answered again too.
	local why, tok = string.match(skip or '', '^[^|]*|([^|]*)|[^|]*|([^|]*)|')
	if tok == ARGV[4] then
		skipNew = why
	end
	-- No claim has started a run since: the record's fence is the run's.
	return answer({1, tonumber(runTry), runWhy, runSlot, '', tonumber(fence or '0')})
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
	if not L and slot then
		return followUpAtStart()
	end
	return answer({6}) -- R10
end
local running = run
-- start answers a run of slot: the run lease, with extra fields.
-- Its fence (F1) is the server's clock in µs, or one more than the
-- record's last fence if the clock has not passed it: above every fence
-- the record handed out. A µs count fits a Lua double exactly.
local function start(slot, try, why, ...)
	local f = tonumber(t[1]) * 1000000 + tonumber(t[2])
	local prev = tonumber(fence or '')
	if prev and prev >= f then
		f = prev + 1
	end
	return answer({1, try, why, slot, '', f}, 'run', ARGV[4] .. '|' .. now .. '|' .. (now + tonumber(ARGV[6])) .. '|' ..
		try .. '|' .. why .. '|' .. slot .. '|' .. now .. '|' .. replica, 'fence', string.format('%.0f', f), ...)
end
-- R9: a request runs when nothing holds the run lease, filed under the
-- slot it arrived in: a Cron job's S, which the claim names; a duration
-- policy's latest slot, the record's.
local function request()
	if running or not want then
		return nil
	elseif L then
		return start(slot or '', 1, 'request', 'want', '')
	end
	return start(S, 1, 'request', 'want', '')
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
if L and (mode == 'tick' or mode == 'catchup') then
	local held = redis.call('GET', L)
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
-- R20: a Cron slot S newer than the record's is none, unless skip names
-- S (S is skipped) or a newer slot (S is past).
local cronNew = not L and slot ~= S and (not slot or tonumber(ARGV[3]) > tonumber(slotAt or '0'))
local skipAt, skipWhy, skipId, skipTok
if skip and (cronNew or L) then
	skipAt, skipWhy, skipId, skipTok = string.match(skip, '^([^|]*)|([^|]*)|([^|]*)|([^|]*)|')
	skipAt, skipWhy = tonumber(skipAt), skipWhy or ''
end
-- skipTick is R20 for a tick that R2 or R3 refuses (why): it records a
-- slot that is none skipped, once, and answers 8, or the request it
-- serves (with R3); false if S is past, or a duration policy's interval
-- had a slot.
local function skipTick(why)
	local id, at = S, ARGV[3]
	if not L and (early or now < tonumber(ARGV[16])) then
		-- S is not due yet, by the replica's clock (a start's tick) or by
		-- the server's (a replica's clock ahead): what holds the job now
		-- may end before it is. Look again when it is due.
		local code = 2
		if why == 'paused' then
			code = 4
		end
		return answer({code, math.max(tonumber(ARGV[16]) - now, 1), 'early', sid})
	elseif L then
		if not fresh then
			return false
		elseif skipAt and skipAt + tonumber(ARGV[14]) > now then
			-- C3: the claim that recorded it, sent again, answers so again.
			local mine, id = 0, ''
			if skipTok == ARGV[4] then
				mine, id = 1, skipId
			end
			if why == 'paused' then
				return request() or answer({8, mine, skipWhy, id})
			end
			return answer({8, mine, skipWhy, id})
		elseif tonumber(slotAt or '0') + tonumber(ARGV[14]) > now then
			return false
		end
		id, at = tostring(now), now
	elseif not cronNew or (skipAt and skipAt > tonumber(at)) then
		return false
	elseif skipAt == tonumber(at) then
		-- C3: the claim that recorded it, sent again, answers so again.
		local mine = 0
		if skipTok == ARGV[4] then
			mine = 1
		end
		if why == 'paused' then
			return request() or answer({8, mine, skipWhy, sid})
		end
		return answer({8, mine, skipWhy, sid})
	end
	skipNew = why
	redis.call('HSET', R, 'skip', at .. '|' .. why .. '|' .. id .. '|' .. ARGV[4] .. '|' .. replica)
	if redis.call('LPUSH', H, cjson.encode({slot = id, by = replica, why = 'schedule', try = '0', due = ARGV[16],
		start = tostring(now), ['end'] = tostring(now), outcome = 'skipped', reason = why, error = ''})) == 1 then
		sameExpiry()
	else
		redis.call('LTRIM', H, 0, tonumber(ARGV[15]) - 1)
	end
	if why == 'paused' then
		return request() or answer({8, 1, why, id})
	end
	return answer({8, 1, why, id})
end
-- heldAtDue is R2 for a Cron slot S that is none and no run holds: the
-- last run began before S's tick was due (S's start, plus the job's
-- spread offset) and ended after: it held the job when S's ticks came,
-- however late this tick comes.
local function heldAtDue()
	local due = tonumber(ARGV[16])
	if not lastEnd and last then
		lastEnd, lastStart = string.match(last, '^([^|]*)|([^|]*)|')
	end
	return lastEnd and tonumber(lastEnd) > due and tonumber(lastStart) < due
end
-- R1, R2: the run lease is held. A skip is E1 sent by a replica whose
-- own run held the job at S's tick: R2 alone decides it.
if running then
	if mode == 'skip' then
		return skipTick('still running') or answer({6})
	elseif mode == 'catchup' then
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
	if mode == 'tick' and of ~= 'same' then
		local r = skipTick('still running') -- R2
		if r then
			return r
		end
	end
	return answer({2, tonumber(runUntil) - now, of, sid})
end
if mode == 'skip' then
	-- R2 for a run that ended (its completion recorded) since it held the
	-- job at S's tick.
	if heldAtDue() then
		return skipTick('still running') or answer({6})
	end
	return answer({6})
end
-- R3: paused.
if paused then
	if mode == 'tick' then
		return skipTick('paused') or request() or answer({4, 0, '', sid})
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
		if tonumber(slotTries or '0') >= max then
			-- Fewer attempts than when it opened (a rolling deploy).
			state = 'failed'
			redis.call('HSET', R, 'slot', packSlot(slot, slotAt, state, slotTries, slotRetry, slotLease))
		elseif tonumber(slotRetry or '0') > now then
			state = 'waiting'
		else
			state = 'due'
		end
	end
elseif cronNew and not skipAt or cronNew and skipAt < tonumber(ARGV[3]) then
	state = 'none'
elseif cronNew and skipAt == tonumber(ARGV[3]) then
	state = 'skipped'
else
	state = 'past'
end
-- open opens slot S at at, and starts its first attempt.
local function open(S, at, why)
	if L then
		redis.call('SET', L, ARGV[10], 'PX', ARGV[9])
		return start(S, 1, why, 'slot', packSlot(S, at, 'open', 1, 0, ARGV[10]))
	end
	return start(S, 1, why, 'slot', packSlot(S, at, 'open', 1, 0, ''))
end
if state == 'none' then -- R4
	if mode == 'tick' then
		if L then
			return open(tostring(now), now, 'schedule')
		end
		if heldAtDue() then
			return skipTick('still running')
		end
		return open(S, ARGV[3], 'schedule')
	elseif mode ~= 'catchup' or not existed then
		return answer({6})
	end
	local window = tonumber(ARGV[13])
	local born = redis.call('HMGET', R, 'born')[1]
	if not L then
		local at = tonumber(ARGV[3])
		if (born and at < tonumber(born)) or now - at > window then
			return answer({6})
		end
		return open(S, ARGV[3], 'catch-up')
	end
	-- A skip recorded within the interval stands for its slot (R20).
	local due = math.max(tonumber(slotAt or born or now), skipAt or 0) + tonumber(ARGV[14])
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
	return start(S, tries, 'retry', 'slot', packSlot(slot, slotAt, slotState, tries, slotRetry, slotLease))
elseif state == 'waiting' then -- R6
	local wait = tonumber(slotRetry) - now
	if mode == 'tick' then
		return request() or answer({5, wait, '', sid})
	end
	return answer({5, wait, '', sid})
elseif mode ~= 'tick' then
	return answer({6})
elseif state == 'skipped' then -- R20
	return request() or answer({8, 0, skipWhy, sid})
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
// It also adds the run to the job's history (PROTOCOL.md, the record), a
// list of the last ARGV[8] runs, newest first, which lives as long as the
// record. ARGV[9] is when the run was due, in ms of its replica's clock;
// ARGV[10] the job's schedule, as the replica states it; ARGV[11] the
// replica's name and ARGV[12] the error text, each as a JSON string, for
// the history's entry. ARGV[13] is how long the slot can still be claimed,
// in ms, as the replica reckons (empty if it does not say): a failed
// attempt whose back-off is as long closes its slot as failed (R12, claim
// window over), and the reply says so as a fourth element.
//
// Sent again for a run it recorded already (R18: its first answer went
// unacknowledged by the replicas, or was lost; C3), it finds the run's token
// in last, answers as it did, and writes last again: a write, so that a
// WAIT after it covers the record as the server has it.
var completeScript = redisscript.New(CompleteSrc)

// CompleteSrc is the completion's source (see ClaimSrc).
const CompleteSrc = recordPrelude + packPatterns + `
local run, slot, want, nxt = unpack(redis.call('HMGET', R, 'run', 'slot', 'want', 'next'))
local runTok, runSince, runUntil, runTry, runWhy, runSlot, runBeat, runBy
if run then
	runTok, runSince, runUntil, runTry, runWhy, runSlot, runBeat, runBy = string.match(run, runPat)
end
local slotAt, slotState, slotTries, slotRetry, slotLease
if slot then
	slot, slotAt, slotState, slotTries, slotRetry, slotLease = string.match(slot, slotPat)
end
local w = 0
if want and want ~= '' then
	w = 1
end
if runTok ~= ARGV[1] then
	local last = redis.call('HMGET', R, 'last')[1]
	if not last then
		return {0}
	end
	local lastSlot, lastWhy, lastTok = string.match(last, '^[^|]*|[^|]*|([^|]*)|[^|]*|([^|]*)|[^|]*|([^|]*)|')
	if lastTok ~= ARGV[1] then
		return {0}
	end
	redis.call('HSET', R, 'last', last)
	local state = ''
	if lastWhy ~= 'request' and lastSlot == slot then
		state = slotState or ''
	end
	return {1, state, w}
end
` + runPrelude + `
local outcome, max = ARGV[2], tonumber(ARGV[4])
local errJSON = '""'
if ARGV[3] ~= '' then
	errJSON = ARGV[12]
end
keep(tonumber(ARGV[6]))
local state = stateAfter(outcome, max)
-- R12: a retry that would start after the slot's claim window closes it.
local closed = ''
if state == 'open' and ARGV[13] and ARGV[13] ~= '' and tonumber(ARGV[5]) >= tonumber(ARGV[13]) then
	state, closed = 'failed', '","reason":"claim window over'
end
if redis.call('LPUSH', H, '{"slot":"' .. runSlot .. '","by":' .. ARGV[11] .. ',"why":"' .. runWhy .. '","try":"' ..
	runTry .. '","due":"' .. ARGV[9] .. '","start":"' .. runSince .. '","end":"' .. now .. '","outcome":"' ..
	outcome .. closed .. '","error":' .. errJSON .. '}') == 1 then
	sameExpiry()
else
	redis.call('LTRIM', H, 0, tonumber(ARGV[8]) - 1)
end
local announce = ARGV[7] ~= '' and (not nxt or tonumber(nxt) <= now or tonumber(ARGV[7]) < tonumber(nxt))
-- One HSET: the run, the slot's new state, and the record's own fields.
local newSlot
if state == 'open' then
	newSlot = slot .. '|' .. slotAt .. '|open|' .. slotTries .. '|' .. (now + tonumber(ARGV[5])) .. '|' .. slotLease
elseif state then
	newSlot = slot .. '|' .. slotAt .. '|' .. state .. '|' .. slotTries .. '|' .. slotRetry .. '|' .. slotLease
end
if outcome == 'ok' then
	if newSlot and announce then
		ended(outcome, now, '', ARGV[1], 'slot', newSlot, 'good', now, 'every', ARGV[10], 'next', ARGV[7])
	elseif newSlot then
		ended(outcome, now, '', ARGV[1], 'slot', newSlot, 'good', now, 'every', ARGV[10])
	elseif announce then
		ended(outcome, now, '', ARGV[1], 'good', now, 'every', ARGV[10], 'next', ARGV[7])
	else
		ended(outcome, now, '', ARGV[1], 'good', now, 'every', ARGV[10])
	end
elseif newSlot and announce then
	ended(outcome, now, ARGV[3], ARGV[1], 'slot', newSlot, 'every', ARGV[10], 'next', ARGV[7])
elseif newSlot then
	ended(outcome, now, ARGV[3], ARGV[1], 'slot', newSlot, 'every', ARGV[10])
elseif announce then
	ended(outcome, now, ARGV[3], ARGV[1], 'every', ARGV[10], 'next', ARGV[7])
else
	ended(outcome, now, ARGV[3], ARGV[1], 'every', ARGV[10])
end
if closed ~= '' then
	return {1, state, w, 'claim window over'}
end
return {1, state or '', w}`

// heartbeatScript is R11: it extends the run lease of the run whose token
// is ARGV[1] by ARGV[2] ms, with now as the run's beat, and the record's
// life to ARGV[3] ms at least.
// 1 if it did, 0 if the run no longer holds the run lease. Sent again
// (C3), it extends the lease again and answers as it did.
var heartbeatScript = redisscript.New(HeartbeatSrc)

// HeartbeatSrc is the heartbeat's source (see ClaimSrc).
const HeartbeatSrc = recordPrelude + `
local run = redis.call('HMGET', R, 'run')[1]
if not run then
	return 0
end
local tok, since, mid, by = string.match(run, '^([^|]*)|([^|]*)|[^|]*|([^|]*|[^|]*|[^|]*)|[^|]*|(.*)$')
if tok ~= ARGV[1] then
	return 0
end
redis.call('HSET', R, 'run', tok .. '|' .. since .. '|' .. (now + tonumber(ARGV[2])) .. '|' .. mid .. '|' .. now .. '|' .. by)
keep(tonumber(ARGV[3]))
return 1`

// controlScript is R15 and R16: an operator's command. ARGV[1] is pause,
// resume or run, ARGV[2] who asks. -1 if the job has no record, else 1.
// A run-now is published by the caller after it (R16), on the channel's
// own node of a sharded client such as a Ring, where a script's PUBLISH
// would reach only the record's.
var controlScript = redisscript.New(`
local R = KEYS[1]
if redis.call('EXISTS', R) == 0 then
	return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local op = ARGV[1]
if op == 'pause' then
	redis.call('HSET', R, 'paused', now .. '|' .. ARGV[2])
elseif op == 'resume' then
	redis.call('HDEL', R, 'paused')
else
	redis.call('HSET', R, 'want', now .. '|' .. ARGV[2])
end
return 1`)
