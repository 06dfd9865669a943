// Package sharedlua runs a miniredis server's scripts in one long-lived Lua
// state, as Redis itself keeps one VM, instead of the fresh state miniredis
// builds, opens and protects for every EVAL and EVALSHA. Scripts see what
// they see under miniredis: the same libraries (cjson, a stub os.clock),
// the same protection of globals and its errors, the same redis.call and
// redis.pcall with their error texts and reply conversions, the same
// replies, and the same script cache, NOSCRIPT after SCRIPT FLUSH
// included. Two things differ, as they do in Redis before 7.0: a change a
// script makes to a table that is already global (string, cjson, redis)
// stays for the scripts after it, and a Lua value that is no reply (a
// function) is answered as a nil, not a crash.
//
// It is built on miniredis's public API: a pre-hook that sees every command
// before miniredis does. A script runs under miniredis's own lock, as
// miniredis runs its scripts, and its commands go to miniredis on one peer
// whose context is a script's: the context of the commands of a script that
// miniredis ran itself once, at Install, kept. What the engine does not run
// itself, miniredis runs: a script in MULTI, from a connection that
// selected a database or subscribed, EVAL_RO and EVALSHA_RO, a script that
// names SELECT or SWAPDB, a SHA it never saw, arguments that miniredis
// refuses, and a script that does not compile. A script that sends a
// command miniredis refuses from scripts gets miniredis's error for it;
// one that sends SELECT or SWAPDB under a name its text does not show gets
// that error too, where miniredis would switch its database.
package sharedlua

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/alicebob/miniredis/v2"
	luajson "github.com/alicebob/miniredis/v2/gopher-json"
	"github.com/alicebob/miniredis/v2/server"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Engine is the Lua state of one miniredis server.
type Engine struct {
	m   *miniredis.Miniredis
	srv *server.Server

	// sideMu orders the engine's own commands on side, which it sends
	// outside m's lock.
	sideMu sync.Mutex
	// clients are the peers whose commands came through the hook: the
	// connections'. A peer that miniredis makes for a script it runs
	// itself comes with its context already set, and is none.
	clients sync.Map
	// borrowing is set while Install has miniredis run a script, whose
	// command's context it keeps; borrowed is that context.
	borrowing atomic.Bool
	borrowed  any

	// Guarded by m's lock.
	own, left int // scripts run here, and left to miniredis
	l         *lua.LState
	redis     *lua.LTable
	scripts   map[string]*script // by SHA1: those miniredis's cache holds too
	multi     map[*server.Peer]bool
	away      map[*server.Peer]bool // selected a database, or subscribed
	sha       string                // of the script that runs
	nested    *server.Peer          // the peer of scripts' redis.call
	out       bytes.Buffer          // what nested writes
	w         *bufio.Writer
	r         *bufio.Reader
	side      *server.Peer // the peer of the engine's own commands (sideMu)
	sideOut   bytes.Buffer
}

// script is one script of the cache: its text, and its function once it
// compiled.
type script struct {
	src      string
	fn       *lua.LFunction
	own      bool // the engine may run it (see unsafe)
	mirrored bool // miniredis's cache has it too
}

// Install makes m's scripts run in one Lua state. m must be started (its
// Server not nil) and have no pre-hook of its own.
func Install(m *miniredis.Miniredis) *Engine {
	e := &Engine{
		m: m, srv: m.Server(),
		scripts: make(map[string]*script),
		multi:   make(map[*server.Peer]bool),
		away:    make(map[*server.Peer]bool),
	}
	e.w = bufio.NewWriter(&e.out)
	e.r = bufio.NewReader(&e.out)
	e.nested = server.NewPeer(e.w)
	e.side = server.NewPeer(bufio.NewWriter(&e.sideOut))
	e.srv.SetPreHook(e.hook)
	// A script that miniredis runs, to borrow the context of its command.
	e.borrowing.Store(true)
	e.sideCommand("EVAL", bootScript, "0")
	e.borrowing.Store(false)
	if e.borrowed == nil {
		panic("sharedlua: miniredis ran its script without a command of it")
	}
	e.nested.Ctx = e.borrowed
	e.m.Lock()
	e.newState()
	e.m.Unlock()
	return e
}

// bootScript is the script that Install has miniredis run, and bootSHA
// its SHA1, which miniredis's errors for the borrowed context name.
const bootScript = "return redis.call('PING')"

var bootSHA = sha1Hex(bootScript)

// sideCommand sends a command of the engine's own to miniredis, not under
// m's lock.
func (e *Engine) sideCommand(args ...string) {
	e.sideMu.Lock()
	defer e.sideMu.Unlock()
	e.srv.Dispatch(e.side, args)
	e.sideOut.Reset()
}

// Scripts returns how many EVALs and EVALSHAs ran in the engine's state,
// and how many it left to miniredis.
func (e *Engine) Scripts() (own, left int) {
	e.m.Lock()
	defer e.m.Unlock()
	return e.own, e.left
}

// switching are the commands that change a script's database: the
// engine's scripts share one context, so it leaves a script that names
// one to miniredis, and refuses one that it did not name.
var switching = map[string]bool{"SELECT": true, "SWAPDB": true}

func (e *Engine) hook(c *server.Peer, cmd string, args ...string) bool {
	if c == e.nested || c == e.side {
		return false // the engine's own peers
	}
	if _, client := e.clients.Load(c); !client {
		if c.Ctx != nil {
			// A command of a script that miniredis runs itself, under
			// its lock: it is miniredis's.
			if e.borrowing.Load() && e.borrowed == nil {
				e.borrowed = c.Ctx
			}
			return false
		}
		e.clients.Store(c, true)
		c.OnDisconnect(func() { e.clients.Delete(c) })
	}
	switch cmd {
	case "EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO":
	case "MULTI", "EXEC", "DISCARD", "SELECT", "SWAPDB", "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "SCRIPT":
	default:
		return false
	}
	e.m.Lock()
	switch cmd {
	case "EVAL", "EVALSHA":
		if e.eval(c, cmd, args) {
			e.own++
			e.m.Unlock()
			return true
		}
		e.left++
		if cmd == "EVALSHA" {
			// miniredis runs it: with the script, if this cache has it.
			if s := e.scripts[args[0]]; s != nil && !s.mirrored {
				s.mirrored = true
				e.m.Unlock()
				e.sideCommand("SCRIPT", "LOAD", s.src)
				return false
			}
		}
	case "EVAL_RO", "EVALSHA_RO":
		e.left++
	case "MULTI":
		e.watch(c, e.multi)
	case "EXEC", "DISCARD":
		delete(e.multi, c)
	case "SELECT", "SWAPDB", "SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE":
		e.watch(c, e.away)
	case "SCRIPT":
		// Before miniredis: what it does to its cache, to this one.
		if len(args) > 0 && !e.multi[c] {
			switch strings.ToUpper(args[0]) {
			case "FLUSH":
				clear(e.scripts)
				e.newState() // and so the functions compiled in the old one go
			case "LOAD":
				if len(args) == 2 {
					e.know(args[1])
				}
			case "EXISTS":
				// miniredis answers: from a cache with every script of
				// this one, which adds those an EVAL ran (as miniredis
				// adds them) only when asked.
				var load []*script
				for _, s := range e.scripts {
					if !s.mirrored {
						s.mirrored = true
						load = append(load, s)
					}
				}
				e.m.Unlock()
				for _, s := range load {
					e.sideCommand("SCRIPT", "LOAD", s.src)
				}
				return false
			}
		}
	}
	e.m.Unlock()
	return false
}

// watch marks c in set until it disconnects.
func (e *Engine) watch(c *server.Peer, set map[*server.Peer]bool) {
	if !set[c] {
		set[c] = true
		c.OnDisconnect(func() {
			e.m.Lock()
			defer e.m.Unlock()
			delete(set, c)
		})
	}
}

// know adds src to the cache, if it parses, as miniredis's SCRIPT LOAD
// adds it to its own.
func (e *Engine) know(src string) {
	sha := sha1Hex(src)
	if _, ok := e.scripts[sha]; ok {
		return
	}
	if _, err := parse.Parse(strings.NewReader(src), "user_script"); err == nil {
		e.scripts[sha] = &script{src: src, own: !unsafe(src), mirrored: true}
	}
}

// quoted finds the commands a script names where it sends them: the
// first argument of redis.call or redis.pcall (or server's), a string
// literal.
var quoted = regexp.MustCompile(`\b(?:redis|server)\s*\.\s*p?call\s*\(\s*(?:'([A-Za-z_]+)'|"([A-Za-z_]+)")`)

// unsafe reports whether src names a command that switches its database.
func unsafe(src string) bool {
	if v, ok := scanned.Load(src); ok {
		return v.(bool)
	}
	found := false
	for _, m := range quoted.FindAllStringSubmatch(src, -1) {
		if switching[strings.ToUpper(m[1]+m[2])] {
			found = true
		}
	}
	scanned.Store(src, found)
	return found
}

// scanned holds unsafe's answers, by script text, for every engine.
var scanned sync.Map

// eval runs EVAL or EVALSHA of c, with m's lock held, and reports whether
// it did; if not, miniredis runs it.
func (e *Engine) eval(c *server.Peer, cmd string, args []string) bool {
	if len(args) < 2 || e.multi[c] || e.away[c] {
		return false
	}
	var s *script
	var sha string
	if cmd == "EVALSHA" {
		sha = args[0]
		if s = e.scripts[sha]; s == nil {
			return false // NOSCRIPT, or a script loaded in a MULTI
		}
	} else {
		sha = sha1Hex(args[0])
		if s = e.scripts[sha]; s == nil {
			s = &script{src: args[0], own: !unsafe(args[0])}
		}
	}
	if !s.own {
		return false
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 || n > len(args)-2 {
		return false // miniredis says why
	}
	if s.fn == nil {
		proto, err := compile(s.src)
		if err != nil {
			return false
		}
		s.fn = e.l.NewFunctionFromProto(proto)
	}
	if e.run(c, sha, s.fn, args[2:2+n], args[2+n:]) && e.scripts[sha] == nil {
		// As miniredis does, an EVAL that ran without error keeps its
		// script (see hook for miniredis's own cache).
		e.scripts[sha] = s
	}
	return true
}

// compiled holds the compiled scripts of every engine, by their text: a
// function prototype is never changed once compiled, and states share
// them (a test binary starts many servers, with the same scripts).
var compiled sync.Map

// compile compiles src as miniredis does, its chunk named "<string>".
func compile(src string) (*lua.FunctionProto, error) {
	if p, ok := compiled.Load(src); ok {
		return p.(*lua.FunctionProto), nil
	}
	chunk, err := parse.Parse(strings.NewReader(src), "<string>")
	if err != nil {
		return nil, err
	}
	proto, err := lua.Compile(chunk, "")
	if err != nil {
		return nil, err
	}
	compiled.Store(src, proto)
	return proto, nil
}

// run runs fn for c with keys and argv, writes its reply or error to c, and
// reports whether it ran without error.
func (e *Engine) run(c *server.Peer, sha string, fn *lua.LFunction, keys, argv []string) bool {
	l := e.l
	l.G.Global.RawSetString("KEYS", strings2table(l, keys))
	l.G.Global.RawSetString("ARGV", strings2table(l, argv))
	e.sha = sha
	defer l.SetTop(0)
	l.Push(fn)
	if err := l.PCall(0, lua.MultRet, nil); err != nil {
		// miniredis's words, and its fmt.Errorf of them as a format.
		msg := "ERR Error compiling script (new function): " + err.Error()
		c.WriteError(fmt.Errorf(msg, noArgs...).Error())
		return false
	}
	e.reply(c, l.Get(1))
	return true
}

var noArgs []any

func strings2table(l *lua.LState, s []string) *lua.LTable {
	t := l.CreateTable(len(s), 0)
	for i, v := range s {
		t.RawSetInt(i+1, lua.LString(v))
	}
	return t
}

// reply writes a script's return value as its reply: nil and false as a
// nil, true as 1, a number as an integer (truncated), a table with an err
// or ok field as an error or a status, another table as an array up to its
// first nil.
func (e *Engine) reply(c *server.Peer, v lua.LValue) {
	switch v := v.(type) {
	case lua.LBool:
		if v {
			c.WriteInt(1)
		} else {
			c.WriteNull()
		}
	case lua.LNumber:
		c.WriteInt(int(v))
	case lua.LString:
		c.WriteBulk(string(v))
	case *lua.LTable:
		if s := v.RawGetString("err"); s.Type() != lua.LTNil {
			c.WriteError(s.String())
			return
		}
		if s := v.RawGetString("ok"); s.Type() != lua.LTNil {
			c.WriteInline(s.String())
			return
		}
		var items []lua.LValue
		for i := 1; ; i++ {
			item := e.l.GetTable(v, lua.LNumber(i))
			if item.Type() == lua.LTNil {
				break
			}
			items = append(items, item)
		}
		c.WriteLen(len(items))
		for _, item := range items {
			e.reply(c, item)
		}
	default: // nil, and what is no reply
		c.WriteNull()
	}
}

// newState makes the Lua state: the libraries miniredis opens, cjson, its
// os, the redis table, then the protection of globals.
func (e *Engine) newState() {
	if e.l != nil {
		e.l.Close()
	}
	for _, s := range e.scripts {
		s.fn = nil
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase},
		{lua.CoroutineLibName, lua.OpenCoroutine}, {lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath},
		{lua.DebugLibName, lua.OpenDebug},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			panic(err)
		}
	}
	luajson.Preload(l)
	if err := l.CallByParam(lua.P{Fn: l.GetGlobal("require"), NRet: 1, Protect: true}, lua.LString("json")); err != nil {
		panic(err)
	}
	l.SetGlobal("cjson", l.Get(-1))
	l.Pop(1)
	l.SetGlobal("KEYS", l.NewTable())
	l.SetGlobal("ARGV", l.NewTable())
	e.redis = l.NewTable()
	for name, f := range map[string]lua.LGFunction{
		"call": e.call(true), "pcall": e.call(false),
		"error_reply": errorReply, "status_reply": statusReply, "log": logNothing,
		"sha1hex": sha1hexLua, "replicate_commands": replicateCommands,
		"set_repl": setRepl, "setresp": setResp,
	} {
		e.redis.RawSetString(name, l.NewFunction(f))
	}
	for i, level := range []string{"LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"} {
		e.redis.RawSetString(level, lua.LNumber(i))
	}
	l.SetGlobal("redis", e.redis)
	l.SetGlobal("server", e.redis)
	l.RegisterModule("os", map[string]lua.LGFunction{"clock": func(l *lua.LState) int {
		l.Push(lua.LNumber(42))
		return 1
	}})
	// Compiled as miniredis compiles, so that its functions' source reads
	// the same in a traceback.
	proto, err := compile(strictGlobals)
	if err != nil {
		panic(err)
	}
	l.Push(l.NewFunctionFromProto(proto))
	if err := l.PCall(0, 0, nil); err != nil {
		panic(err)
	}
	e.l = l
}

// strictGlobals keeps scripts from creating or reading a global that is
// not there, with Redis's words, and then takes debug away. An error's
// traceback names the line of the function and of its error call: they
// sit where miniredis's have theirs (lines 5 and 9, 14 and 16), so that a
// script's error reads the same to the byte.
const strictGlobals = `
local info = debug.getinfo
local strict = {}
setmetatable(_G, strict)
strict.__newindex = function(g, name, value)
	local caller = info(2, "S")
	if caller then
		if caller.what ~= "C" then
			error("Script attempted to create global variable '" .. tostring(name) .. "'", 2)
		end
	end
	rawset(g, name, value)
end
strict.__index = function(g, name)
	local caller = info(2, "S")
	if caller and caller.what ~= "C" then error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2) end
	return rawget(g, name)
end
debug = nil
`

// call is redis.call (raise) or redis.pcall: it sends a command as the
// script's, on the engine's nested peer, and turns its reply into Lua.
func (e *Engine) call(raise bool) lua.LGFunction {
	return func(l *lua.LState) int {
		top := l.GetTop()
		if top == 0 {
			l.Error(lua.LString(fmt.Sprintf("Please specify at least one argument for this redis lib call script: %s, &c.", e.sha)), 1)
			return 0
		}
		args := make([]string, 0, top)
		for i := 1; i <= top; i++ {
			switch a := l.Get(i).(type) {
			case lua.LNumber:
				args = append(args, a.String())
			case lua.LString:
				args = append(args, string(a))
			default:
				l.Error(lua.LString(fmt.Sprintf("Lua redis lib command arguments must be strings or integers script: %s, &c.", e.sha)), 1)
				return 0
			}
		}
		e.out.Reset()
		if switching[strings.ToUpper(args[0])] {
			// It would switch the database of every script after it:
			// refused, in miniredis's words for a command it refuses
			// from a script.
			e.nested.WriteError(fmt.Sprintf("This Redis command is not allowed from script script: %s, &c", e.sha))
		} else {
			e.srv.Dispatch(e.nested, args)
		}
		e.w.Flush()
		e.r.Reset(&e.out)
		res, err := server.ParseReply(e.r)
		if err != nil && strings.Contains(err.Error(), bootSHA) {
			// miniredis names the script whose context the peer has:
			// this one is the script.
			err = errors.New(strings.ReplaceAll(err.Error(), bootSHA, e.sha))
		}
		if err != nil {
			unknown := strings.Contains(err.Error(), "ERR unknown command")
			if raise {
				if unknown {
					l.Error(lua.LString(fmt.Sprintf("Unknown Redis command called from script script: %s, &c.", e.sha)), 1)
				} else {
					l.Error(lua.LString(err.Error()), 1)
				}
				return 0
			}
			t := l.NewTable()
			if unknown {
				t.RawSetString("err", lua.LString("ERR Unknown Redis command called from script"))
			} else {
				t.RawSetString("err", lua.LString(err.Error()))
			}
			l.Push(t)
			return 1
		}
		switch r := res.(type) {
		case nil:
			l.Push(lua.LFalse)
		case error:
			l.Error(lua.LString(r.Error()), 1)
			return 0
		case server.Simple:
			t := l.NewTable()
			t.RawSetString("ok", lua.LString(string(r)))
			l.Push(t)
		default:
			l.Push(toLua(l, r))
		}
		return 1
	}
}

// toLua turns a parsed reply into Lua: integers into numbers, bulk strings
// into strings, a nil inside an array into false, arrays into tables.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LFalse
	case int:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []byte:
		return lua.LString(string(v))
	case string:
		return lua.LString(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.RawSetInt(t.Len()+1, toLua(l, item))
		}
		return t
	}
	panic(fmt.Sprintf("sharedlua: a reply of type %T", v))
}

func errorReply(l *lua.LState) int {
	msg, ok := l.Get(1).(lua.LString)
	if !ok {
		l.Error(lua.LString("wrong number or type of arguments"), 1)
		return 0
	}
	code, text, two := strings.Cut(string(msg), " ")
	if code != "" && code[0] == '-' {
		code = code[1:]
	}
	t := l.NewTable()
	if two {
		t.RawSetString("err", lua.LString(code+" "+text))
	} else {
		t.RawSetString("err", lua.LString("ERR "+code))
	}
	l.Push(t)
	return 1
}

func statusReply(l *lua.LState) int {
	msg, ok := l.Get(1).(lua.LString)
	if !ok {
		l.Error(lua.LString("wrong number or type of arguments"), 1)
		return 0
	}
	t := l.NewTable()
	t.RawSetString("ok", msg)
	l.Push(t)
	return 1
}

func logNothing(l *lua.LState) int {
	l.CheckInt(1)
	l.CheckString(2)
	return 0
}

func sha1hexLua(l *lua.LState) int {
	if l.GetTop() != 1 {
		l.Error(lua.LString("wrong number of arguments"), 1)
		return 0
	}
	l.Push(lua.LString(sha1Hex(lua.LVAsString(l.Get(1)))))
	return 1
}

func replicateCommands(l *lua.LState) int {
	l.Push(lua.LTrue)
	return 1
}

func setRepl(l *lua.LState) int {
	if l.GetTop() != 1 {
		l.Error(lua.LString("wrong number of arguments"), 1)
		return 0
	}
	return 1
}

// setResp checks its argument; it changes nothing a script sees, as under
// miniredis, which restores the caller's protocol after the script.
func setResp(l *lua.LState) int {
	if v := l.CheckInt(1); v != 2 && v != 3 {
		l.Error(lua.LString("RESP version must be 2 or 3"), 1)
	}
	return 0
}

func sha1Hex(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
