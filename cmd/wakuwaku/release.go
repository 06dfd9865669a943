package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redisscript"
)

// releaseScript reads what the lock key KEYS[1] holds and, if ARGV[2] is
// "1", deletes it, in one step, so that what the tool prints is what it
// deleted. ARGV[1] is the type the key has if it is the lock it is named
// for: "string" for a Lock or an RwLock's writer, "zset" for an RwLock's
// readers. It answers {type} if the key has another type (or is gone:
// "none"), else {type, the server's time in ms, PTTL, the token, or the
// readers' tokens and lease ends as ZRANGE … WITHSCORES gives them}.
var releaseScript = redisscript.New(`
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind ~= ARGV[1] then
	return {kind}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = redis.call('PTTL', KEYS[1])
local held
if kind == 'string' then
	held = redis.call('GET', KEYS[1])
else
	held = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
end
if ARGV[2] == '1' then
	redis.call('DEL', KEYS[1])
end
return {kind, now, ttl, held}
`)

// release shows what a lock's key holds and, with force, deletes it.
// Without force it deletes nothing and says what -force would delete: a
// dry run that did what it was asked.
func (t *tool) release(ctx context.Context, key string, force bool) error {
	k, err := parseLockKey(key)
	if err != nil {
		return err
	}
	want := "string"
	if k.role == roleReaders {
		want = "zset"
	}
	del := "0"
	if force {
		del = "1"
	}
	reply, err := releaseScript.Run(ctx, t.rdb, []string{key}, want, del).Slice()
	if err != nil {
		return fmt.Errorf("release %q: %w", key, err)
	}
	if len(reply) == 1 {
		switch kind, _ := reply[0].(string); kind {
		case "none":
			return fmt.Errorf("%s is not held: no key %q", k, key)
		default:
			held := "a lock's token"
			if k.role == roleReaders {
				held = "an RwLock's readers"
			}
			return fmt.Errorf("%q holds a %s, not %s: refusing to touch it", key, kind, held)
		}
	}
	if len(reply) != 4 {
		return fmt.Errorf("release %q: unexpected reply %v", key, reply)
	}
	now, _ := reply[1].(int64)
	ttl, _ := reply[2].(int64)
	var what string
	if k.role == roleReaders {
		what = readers(k, reply[3], now)
	} else {
		token, _ := reply[3].(string)
		what = fmt.Sprintf("%s held by token %x, %s", k, token, leaseLeft(ttl))
	}
	if !force {
		fmt.Fprintf(t.out, "not released without -force (its holder may still think it holds it): %s\n", what)
		return nil
	}
	verb := "released"
	if k.role == roleReaders {
		verb = "removed"
	}
	fmt.Fprintf(t.out, "%s %s\n", verb, what)
	return nil
}

// readers describes an RwLock's readers from ZRANGE … WITHSCORES: tokens
// and the ends of their leases, in ms of the server's clock now.
func readers(k lockKey, zrange any, now int64) string {
	flat, _ := zrange.([]any)
	var each []string
	for i := 0; i+1 < len(flat); i += 2 {
		token, _ := flat[i].(string)
		end, err := strconv.ParseFloat(fmt.Sprint(flat[i+1]), 64)
		if err != nil {
			each = append(each, fmt.Sprintf("token %x", token))
			continue
		}
		left := time.Duration(int64(end)-now) * time.Millisecond
		if left > 0 {
			each = append(each, fmt.Sprintf("token %x with %v of its lease left", token, left))
		} else {
			each = append(each, fmt.Sprintf("token %x whose lease ended %v ago", token, -left))
		}
	}
	n := len(each)
	who := "the reader"
	if n != 1 {
		who = fmt.Sprintf("the %d readers", n)
	}
	return fmt.Sprintf("%s of %s: %s", who, strings.TrimPrefix(k.String(), "the read locks of "), strings.Join(each, "; "))
}

// leaseLeft says how long a lock's key has to live, from its PTTL.
func leaseLeft(ttl int64) string {
	if ttl < 0 {
		return "with no expiry set"
	}
	return fmt.Sprintf("with %v of its lease left", time.Duration(ttl)*time.Millisecond)
}
