package cron

import "github.com/wakuwaku-go/wakuwaku/internal/redisscript"

// The scripts that keep a leased job's record (see [Leased]): a claim before
// a run, a heartbeat while it runs, a completion after it, and the
// operators' commands. Each is one round trip. KEYS[1] is the record, a
// hash; a duration policy's claim also gets the seed's lease key as
// KEYS[2]. Times are milliseconds of the server's clock (TIME), so that the
// replicas' clocks never decide who runs.

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
	'slot', 'slot.at', 'slot.state', 'slot.tries', 'slot.retry', 'slot.lease', 'paused', 'want', 'next'}
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
-- keep makes the record live ms more: every replica computes the same.
local function keep(ms)
	redis.call('PEXPIRE', R, ms)
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
-- finish ends the run in progress: last (and fail, unless it succeeded),
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

// claimScript decides whether this replica runs now, and if so records the
// run in progress under its run lease. ARGV: mode (tick, catchup, request,
// hello), the slot's key and start (a Cron job's; empty for a duration
// policy, whose slot the seed's lease KEYS[2] opens), the run's token, the
// replica, the run lease in ms, how long the record lives in ms, the
// attempts a slot gets, the seed lease's TTL in ms and its new token and
// this replica's previous one (a duration policy's), the next tick in ms
// (or empty), the catch-up window in ms and the interval in ms.
//
// Reply: {1, attempt, trigger} to run; {2, ms} another run is in progress
// for ms more; {3} the slot ran, or runs elsewhere; {4} paused; {5, ms}
// the slot waits ms for its next attempt; {6} nothing to do; {7} the slot
// failed all its attempts.
var claimScript = redisscript.New(recordPrelude + `
local mode, replica, max = ARGV[1], ARGV[5], tonumber(ARGV[8])
hset('seen', now, 'seen.by', replica)
setnext(ARGV[12])
keep(tonumber(ARGV[7]))
if get('run') and num('run.until') < now then
	-- Its replica died, or lost Redis for longer than the run lease.
	finish('lost', get('run.until'), 'the run lease expired: its replica died or lost Redis', max, 0)
end
local running = get('run')
local function start(slot, try, why)
	hset('run', ARGV[4], 'run.by', replica, 'run.since', now,
		'run.until', now + tonumber(ARGV[6]), 'run.slot', slot, 'run.try', try, 'run.why', why)
	return {1, try, why}
end
local function request()
	if running or not get('want') then
		return nil
	end
	hdel('want', 'want.by')
	local slot = ARGV[2]
	if slot == '' then
		slot = get('slot') or ''
	end
	return start(slot, 1, 'request')
end
if mode == 'hello' then
	return {6}
end
if mode == 'request' then
	local r = request()
	if r then
		return r
	elseif running then
		return {2, num('run.until') - now}
	end
	return {6}
end
if running then
	return {2, num('run.until') - now}
end
if get('paused') then
	return request() or {4}
end
local function same()
	local tries = num('slot.tries')
	if get('slot.state') == 'open' and tries < max then
		local wait = num('slot.retry') - now
		if wait > 0 then
			return request() or {5, wait}
		end
		hset('slot.tries', tries + 1)
		return start(get('slot'), tries + 1, 'retry')
	end
	local r = request()
	if r then
		return r
	elseif get('slot.state') == 'failed' then
		return {7}
	end
	return {3}
end
local function open(slot, at, why)
	hset('slot', slot, 'slot.at', at, 'slot.state', 'open', 'slot.tries', 1, 'slot.retry', 0)
	return start(slot, 1, why)
end
local why = 'schedule'
if mode == 'catchup' then
	why = 'catch-up'
end
if #KEYS == 1 then
	local slot, at = ARGV[2], tonumber(ARGV[3])
	if get('slot') == slot then
		return same()
	elseif at <= tonumber(get('slot.at') or '-1') then
		return request() or {3}
	elseif mode == 'catchup' and now - at > tonumber(ARGV[13]) then
		return {6}
	end
	return open(slot, at, why)
end
local held = redis.call('GET', KEYS[2])
if held and held == get('slot.lease') then
	if mode == 'tick' and held == ARGV[11] and get('slot.state') ~= 'open' then
		-- This replica's own lease of its previous slot outlived it (Redis
		-- answered late): nobody else ran since, so the tick opens a slot.
		redis.call('SET', KEYS[2], ARGV[10], 'PX', ARGV[9])
		hset('slot.lease', ARGV[10])
		return open(tostring(now), now, why)
	elseif mode == 'catchup' then
		return {6}
	end
	return same()
elseif held then
	-- Taken by the seed's pattern by hand, or by a version without records.
	return request() or {3}
end
if mode == 'catchup' and get('slot.at') then
	local due = num('slot.at') + tonumber(ARGV[14])
	if now < due or now - due > tonumber(ARGV[13]) then
		return {6}
	end
end
redis.call('SET', KEYS[2], ARGV[10], 'PX', ARGV[9])
hset('slot.lease', ARGV[10])
return open(tostring(now), now, why)`)

// completeScript records the end of the run whose token is ARGV[1]: its
// outcome (ok, error, panic, lost), its error text, the attempts a slot
// gets, the back-off in ms before the slot's next attempt, how long the
// record lives, and the next tick in ms (or empty). Reply: {0} if the run
// no longer held its lease, else {1, state of its slot (” for none), 1 if
// a run-now request waits}.
var completeScript = redisscript.New(recordPrelude + `
if get('run') ~= ARGV[1] then
	return {0}
end
local state = finish(ARGV[2], now, ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]))
setnext(ARGV[7])
keep(tonumber(ARGV[6]))
local want = 0
if get('want') then
	want = 1
end
return {1, state or '', want}`)

// heartbeatScript extends the run lease of the run whose token is ARGV[1]
// by ARGV[2] ms, and the record's life to ARGV[3] ms. 1 if it did, 0 if
// the run no longer holds it.
var heartbeatScript = redisscript.New(recordPrelude + `
if get('run') ~= ARGV[1] then
	return 0
end
hset('run.until', now + tonumber(ARGV[2]))
keep(tonumber(ARGV[3]))
return 1`)

// controlScript is an operator's command: ARGV[1] is pause, resume or run,
// ARGV[2] who asks, ARGV[3] the run-now channel and ARGV[4] the job. -1 if
// the job has no record, else 1.
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
	redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return 1`)
