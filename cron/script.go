package cron

import "github.com/wakuwaku-go/wakuwaku/internal/redisscript"

// The scripts that keep a leased job's record: the claim, the heartbeat,
// the completion and the operators' commands of PROTOCOL.md, whose rows
// they cite. Each is one round trip. KEYS[1] is the record, a hash; a
// duration policy's claim also gets the job's lease key (the Rust crate's)
// as KEYS[2]. Times are milliseconds of the server's clock (TIME), so that
// the replicas' clocks never decide who runs.

// recordPrelude defines now, the record R, and the helpers every script
// uses.
const recordPrelude = `
local R = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
-- The fields a script may read, fetched with one HMGET at the first read
-- and kept up to date by hset and hdel, so that a script costs the server
-- a few commands, not one per field.
local cache = nil
local readable = {'run', 'run.by', 'run.since', 'run.until', 'run.slot', 'run.try', 'run.why',
	'slot', 'slot.at', 'slot.state', 'slot.tries', 'slot.retry', 'slot.lease', 'paused', 'want', 'next',
	'seen', 'born'}
local function get(f)
	if not cache then
		cache = {}
		local v = redis.call('HMGET', R, unpack(readable))
		for i, name in ipairs(readable) do
			cache[name] = v[i]
		end
	end
	return cache[f]
end
local function num(f) return tonumber(get(f) or '0') end
local function hset(...)
	local a = {...}
	if cache then
		for i = 1, #a, 2 do
			cache[a[i]] = tostring(a[i + 1])
		end
	end
	redis.call('HSET', R, ...)
end
local function hdel(...)
	if cache then
		for _, f in ipairs({...}) do
			cache[f] = false
		end
	end
	redis.call('HDEL', R, ...)
end
-- keep makes the record live ms more at least (C2): never less than it
-- was to live already, which another replica may have asked for.
local function keep(ms)
	if redis.call('PTTL', R) < ms then
		redis.call('PEXPIRE', R, ms)
	end
end
local function setnext(n)
	if n ~= '' then
		local cur = num('next')
		if cur <= now or tonumber(n) < cur then
			hset('next', n)
		end
	end
end
local runFields = {'run', 'run.by', 'run.since', 'run.until', 'run.slot', 'run.try', 'run.why'}
local function record(prefix, outcome, ended)
	hset(prefix .. 'slot', get('run.slot'), prefix .. 'by', get('run.by'),
		prefix .. 'start', get('run.since'), prefix .. 'end', ended, prefix .. 'outcome', outcome,
		prefix .. 'try', get('run.try'), prefix .. 'why', get('run.why'))
end
-- finish ends the run in progress (C1, R12): last (and fail, unless it succeeded),
-- and the state of its slot, which it returns (false for a requested run,
-- which has none).
local function finish(outcome, ended, err, max, backoff)
	local state = false
	record('last.', outcome, ended)
	if outcome ~= 'ok' then
		record('fail.', outcome, ended)
		hset('fail.error', err)
	end
	local slot, try = get('run.slot'), tonumber(get('run.try'))
	if get('run.why') ~= 'request' and get('slot') == slot then
		if outcome == 'ok' then
			state = 'done'
		elseif try < max then
			state = 'open'
			hset('slot.retry', now + backoff)
		else
			state = 'failed'
		end
		hset('slot.state', state)
	end
	hdel(unpack(runFields))
	return state
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
var claimScript = redisscript.New(recordPrelude + `
local mode, S, replica, max = ARGV[1], ARGV[2], ARGV[5], tonumber(ARGV[8])
-- C2: the record says who saw it last, and lives long enough.
local existed = get('seen')
if not existed then
	hset('born', now)
end
hset('seen', now, 'seen.by', replica)
setnext(ARGV[12])
keep(tonumber(ARGV[7]))
-- C1: a run whose lease ended is over.
if get('run') and num('run.until') < now then
	finish('lost', get('run.until'), 'the run lease expired: its replica died or lost Redis', max, 0)
end
if mode == 'hello' then
	return {6} -- R10
end
local running = get('run')
local function start(slot, try, why)
	hset('run', ARGV[4], 'run.by', replica, 'run.since', now,
		'run.until', now + tonumber(ARGV[6]), 'run.slot', slot, 'run.try', try, 'run.why', why)
	return {1, try, why, slot}
end
-- R9: a request runs when nothing holds the run lease.
local function request()
	if running or not get('want') then
		return nil
	end
	hdel('want', 'want.by')
	return start(get('slot') or '', 1, 'request')
end
if mode == 'request' then
	local r = request()
	if r then
		return r
	elseif running then
		return {2, num('run.until') - now, 'other', ''}
	end
	return {6}
end
-- Which slot a duration policy's tick or catch-up is for: D1 to D4.
local fresh = false
if #KEYS == 2 and (mode == 'tick' or mode == 'catchup') then
	local held = redis.call('GET', KEYS[2])
	if not held then
		fresh = true -- D1
	elseif held == get('slot.lease') then
		if mode == 'tick' and held == ARGV[11] and get('slot.state') ~= 'open' then
			fresh = true -- D3
		else
			S = get('slot') -- D2
		end
	elseif mode == 'tick' then
		return request() or {3, 0, '', ''} -- D4
	else
		return {6}
	end
end
local sid = S or ''
-- R1, R2: the run lease is held.
if running then
	if mode == 'catchup' then
		return {6}
	end
	local of = 'other'
	if not fresh and get('run.why') ~= 'request' and get('run.slot') == S and get('slot') == S then
		of = 'same'
	elseif get('run.by') == replica then
		of = 'mine'
	end
	return {2, num('run.until') - now, of, sid}
end
-- R3: paused.
if get('paused') then
	if mode == 'tick' then
		return request() or {4, 0, '', sid}
	elseif mode == 'catchup' then
		return {6}
	end
	return {4, 0, '', sid}
end
-- The state of S.
local state
if fresh then
	state = 'none'
elseif get('slot') == S then
	state = get('slot.state')
	if state == 'open' then
		if num('slot.tries') >= max then
			-- Fewer attempts than when it opened (a rolling deploy).
			state = 'failed'
			hset('slot.state', state)
		elseif num('slot.retry') > now then
			state = 'waiting'
		else
			state = 'due'
		end
	end
elseif #KEYS == 1 and (not get('slot') or tonumber(ARGV[3]) > num('slot.at')) then
	state = 'none'
else
	state = 'past'
end
local function open(slot, at, why)
	if #KEYS == 2 then
		redis.call('SET', KEYS[2], ARGV[10], 'PX', ARGV[9])
		hset('slot.lease', ARGV[10])
	end
	hset('slot', slot, 'slot.at', at, 'slot.state', 'open', 'slot.tries', 1, 'slot.retry', 0)
	return start(slot, 1, why)
end
if state == 'none' then -- R4
	if mode == 'tick' then
		if #KEYS == 2 then
			return open(tostring(now), now, 'schedule')
		end
		return open(S, ARGV[3], 'schedule')
	elseif mode ~= 'catchup' or not existed then
		return {6}
	end
	local window = tonumber(ARGV[13])
	if #KEYS == 1 then
		local at = tonumber(ARGV[3])
		if (get('born') and at < num('born')) or now - at > window then
			return {6}
		end
		return open(S, ARGV[3], 'catch-up')
	end
	local due = tonumber(get('slot.at') or get('born') or now) + tonumber(ARGV[14])
	if now < due or now - due > window then
		return {6}
	end
	return open(tostring(now), now, 'catch-up')
elseif mode == 'catchup' then
	return {6}
elseif state == 'due' then -- R5
	local tries = num('slot.tries') + 1
	hset('slot.tries', tries)
	return start(S, tries, 'retry')
elseif state == 'waiting' then -- R6
	local wait = num('slot.retry') - now
	if mode == 'tick' then
		return request() or {5, wait, '', sid}
	end
	return {5, wait, '', sid}
elseif mode ~= 'tick' then
	return {6}
elseif state == 'failed' then -- R8
	return request() or {7, 0, '', sid}
end
return request() or {3, 0, '', sid} -- R7`)

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
var completeScript = redisscript.New(recordPrelude + `
if get('run') ~= ARGV[1] then
	return {0}
end
local H, keepRuns = KEYS[2], tonumber(ARGV[8])
-- A run is named by its slot, attempt and start: two runs can start in one
-- millisecond.
local function name(slot, try, start)
	return tostring(slot or '') .. ' ' .. tostring(try or '') .. ' ' .. tostring(start or '')
end
local function push(e)
	redis.call('LPUSH', H, cjson.encode(e))
	hset('hist.last', name(e.slot, e.try, e.start))
end
-- A run that C1 recorded lost since the last completion enters the history
-- before this one: it is in last, and not the history's newest.
local prev = redis.call('HMGET', R, 'last.outcome', 'last.start', 'last.end', 'last.slot', 'last.by', 'last.why', 'last.try', 'fail.error', 'hist.last')
if prev[1] == 'lost' and name(prev[4], prev[7], prev[2]) ~= prev[9] then
	push({slot = prev[4], by = prev[5], why = prev[6], try = prev[7], due = '', start = prev[2],
		['end'] = prev[3], outcome = 'lost', error = prev[8] or ''})
end
local ran = {slot = get('run.slot'), by = get('run.by'), why = get('run.why'), try = get('run.try'),
	due = ARGV[9], start = get('run.since'), ['end'] = tostring(now), outcome = ARGV[2], error = ARGV[3]}
local state = finish(ARGV[2], now, ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]))
push(ran)
redis.call('LTRIM', H, 0, keepRuns - 1)
if ARGV[2] == 'ok' then
	hset('good', now)
end
hset('every', ARGV[10])
setnext(ARGV[7])
keep(tonumber(ARGV[6]))
redis.call('PEXPIRE', H, redis.call('PTTL', R))
local want = 0
if get('want') then
	want = 1
end
return {1, state or '', want}`)

// heartbeatScript is R11: it extends the run lease of the run whose token
// is ARGV[1] by ARGV[2] ms, and the record's life to ARGV[3] ms at least.
// 1 if it did, 0 if the run no longer holds the run lease.
var heartbeatScript = redisscript.New(recordPrelude + `
if get('run') ~= ARGV[1] then
	return 0
end
hset('run.until', now + tonumber(ARGV[2]))
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
	hset('paused', now, 'paused.by', ARGV[2])
elseif op == 'resume' then
	hdel('paused', 'paused.by')
else
	hset('want', now, 'want.by', ARGV[2])
end
return 1`)
