package sharedlua_test

import (
	"bufio"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/wakuwaku-go/wakuwaku/internal/sharedlua"
)

// conn is a raw RESP connection, which keeps every byte of a reply.
type conn struct {
	c  net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, m *miniredis.Miniredis) *conn {
	t.Helper()
	c, err := net.Dial("tcp", m.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &conn{c: c, br: bufio.NewReader(c)}
}

// do sends a command and returns its reply's bytes.
func (c *conn) do(t *testing.T, args ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.c.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := readReply(c.br, &out); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return out.String()
}

// readReply copies one RESP2 or RESP3 reply from br to out.
func readReply(br *bufio.Reader, out *strings.Builder) error {
	line, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	out.WriteString(line)
	body := strings.TrimSuffix(line[1:], "\r\n")
	switch line[0] {
	case '$', '=', '!': // bulk, verbatim, bulk error
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return err
		}
		buf := make([]byte, n+2)
		if _, err := ioReadFull(br, buf); err != nil {
			return err
		}
		out.Write(buf)
	case '*', '~', '>', '%', '|': // array, set, push, map, attribute
		n, err := strconv.Atoi(body)
		if err != nil || n < 0 {
			return err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range n {
			if err := readReply(br, out); err != nil {
				return err
			}
		}
	}
	return nil
}

func ioReadFull(br *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		k, err := br.Read(buf[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// servers starts two miniredis servers, the first with the engine.
func servers(t *testing.T) (shared, fresh *miniredis.Miniredis, e *sharedlua.Engine) {
	t.Helper()
	shared, fresh = miniredis.RunT(t), miniredis.RunT(t)
	return shared, fresh, sharedlua.Install(shared)
}

// TestRepliesAsMiniredis sends the same commands to a miniredis server
// whose scripts run in the engine and to one whose scripts run in
// miniredis's own fresh states, over RESP2 and RESP3, and wants every
// reply the same to the byte: each reply type a script can give, the
// errors of redis.call and redis.pcall, of globals, of arguments, of
// compiling and running, the script cache and NOSCRIPT after SCRIPT
// FLUSH, and the fall-backs (MULTI, SELECT, EVAL_RO).
func TestRepliesAsMiniredis(t *testing.T) {
	steps := [][]string{
		{"SET", "k", "v"}, {"HSET", "h", "a", "1", "b", "2"}, {"RPUSH", "l", "x", "y"},
		{"EVAL", "return nil", "0"},
		{"EVAL", "return true", "0"},
		{"EVAL", "return false", "0"},
		{"EVAL", "return 42", "0"},
		{"EVAL", "return 3.99", "0"},
		{"EVAL", "return -2.5", "0"},
		{"EVAL", "return 'text'", "0"},
		{"EVAL", "return {1, 'two', {3, 'four', {}}}", "0"},
		{"EVAL", "return {1, nil, 3}", "0"},
		{"EVAL", "return {err = 'MYERR my own'}", "0"},
		{"EVAL", "return {ok = 'FINE'}", "0"},
		{"EVAL", "return redis.error_reply('BAD thing')", "0"},
		{"EVAL", "return redis.error_reply('-WRONG thing')", "0"},
		{"EVAL", "return redis.error_reply('single')", "0"},
		{"EVAL", "return redis.error_reply(1)", "0"},
		{"EVAL", "return redis.status_reply('DONE')", "0"},
		{"EVAL", "return redis.call('GET', KEYS[1])", "1", "k"},
		{"EVAL", "return redis.call('GET', 'missing')", "0"},
		{"EVAL", "return redis.call('SET', KEYS[1], ARGV[1])", "1", "k2", "v2"},
		{"EVAL", "return redis.call('HGETALL', 'h')", "0"},
		{"EVAL", "return redis.call('HMGET', 'h', 'a', 'zz', 'b')", "0"},
		{"EVAL", "return redis.call('LRANGE', 'l', 0, -1)", "0"},
		{"EVAL", "return redis.call('INCR', 'n')", "0"},
		{"EVAL", "return redis.call('INCRBYFLOAT', 'f', '1.5')", "0"},
		{"EVAL", "return redis.call('TYPE', 'h')", "0"},
		{"EVAL", "return redis.call('PING')", "0"},
		{"EVAL", "return redis.call('TIME')[1] ~= nil", "0"},
		{"EVAL", "return redis.call('INCR', 'k')", "0"},
		{"EVAL", "return redis.pcall('INCR', 'k')", "0"},
		{"EVAL", "local r = redis.pcall('INCR', 'k'); return r.err", "0"},
		{"EVAL", "return redis.call('NOSUCH', 'x')", "0"},
		{"EVAL", "return redis.pcall('NOSUCH', 'x')", "0"},
		{"EVAL", "return redis.call()", "0"},
		{"EVAL", "return redis.call({})", "0"},
		{"EVAL", "return redis.call('SET', 'k', 1.5)", "0"},
		{"EVAL", "return redis.call('EVAL', 'return 1', '0')", "0"},
		{"EVAL", "return redis.pcall('MULTI')", "0"},
		{"EVAL", "return redis.call('SUBSCRIBE', 'ch')", "0"},
		{"EVAL", "return redis.call('SCRIPT', 'FLUSH')", "0"},
		{"EVAL", "return redis.call('AUTH', 'x')", "0"},
		{"EVAL", "return redis.call('PUBLISH', 'ch', 'm')", "0"},
		{"EVAL", "x = 1", "0"},
		{"EVAL", "return undefinedthing", "0"},
		{"EVAL", "local t = {} t.x = 1 return t.x", "0"},
		{"EVAL", "return cjson.encode({a = {1, 2}})", "0"},
		{"EVAL", "return cjson.decode('[1,\"b\"]')", "0"},
		{"EVAL", "return redis.sha1hex('abc')", "0"},
		{"EVAL", "return redis.sha1hex()", "0"},
		{"EVAL", "return os.clock()", "0"},
		{"EVAL", "return type(debug)", "0"},
		{"EVAL", "return tostring(1e15) .. ' ' .. string.format('%.0f', 1e15)", "0"},
		{"EVAL", "redis.log(redis.LOG_WARNING, 'hello'); return redis.LOG_NOTICE", "0"},
		{"EVAL", "return redis.replicate_commands()", "0"},
		{"EVAL", "return redis.set_repl(1)", "0"},
		{"EVAL", "redis.setresp(3); return redis.call('HGETALL', 'h')", "0"},
		{"EVAL", "redis.setresp(4)", "0"},
		{"EVAL", "return #KEYS .. ' ' .. #ARGV .. ' ' .. KEYS[2] .. ARGV[1]", "2", "a", "b", "c"},
		{"EVAL", "return 1", "-1"},
		{"EVAL", "return 1", "3", "a"},
		{"EVAL", "return 1", "x"},
		{"EVAL", "return 1"},
		{"EVAL", "return (", "0"},
		{"EVAL", "error('boom')", "0"},
		{"EVAL", "error('100% sure')", "0"},
		{"EVAL", "error({err = 'TABLE err'})", "0"},
		{"EVAL", "local a = nil; return a.b", "0"},
		{"EVALSHA", "0123456789012345678901234567890123456789", "0"},
		{"EVALSHA", sha("return 'cached'"), "0"},
		{"EVAL", "return 'cached'", "0"},
		{"EVALSHA", sha("return 'cached'"), "0"},
		{"SCRIPT", "EXISTS", sha("return 'cached'"), sha("return 'never'")},
		{"EVAL", "error('not kept')", "0"},
		{"SCRIPT", "EXISTS", sha("error('not kept')")},
		{"SCRIPT", "LOAD", "return ARGV[1] .. 'loaded'"},
		{"EVALSHA", sha("return ARGV[1] .. 'loaded'"), "0", "was "},
		{"SCRIPT", "LOAD", "return ("},
		{"SCRIPT", "FLUSH"},
		{"EVALSHA", sha("return ARGV[1] .. 'loaded'"), "0", "x"},
		{"EVALSHA", sha("return 'cached'"), "0"},
		{"MULTI"},
		{"EVAL", "return redis.call('INCR', 'm')", "0"},
		{"EVAL", "return 'in multi'", "0"},
		{"EXEC"},
		{"EVAL_RO", "return redis.call('GET', 'k2')", "0"},
		{"EVAL_RO", "return redis.call('SET', 'k2', 'no')", "0"},
		{"SELECT", "1"},
		{"EVAL", "return redis.call('SET', 'in1', 'yes')", "0"},
		{"EVAL", "return redis.call('GET', 'in1')", "0"},
		{"SELECT", "0"},
		{"EVAL", "return redis.call('GET', 'in1')", "0"},
	}
	for _, proto := range []string{"2", "3"} {
		t.Run("RESP"+proto, func(t *testing.T) {
			shared, fresh, e := servers(t)
			a, b := dial(t, shared), dial(t, fresh)
			a.do(t, "HELLO", proto)
			b.do(t, "HELLO", proto)
			for _, step := range steps {
				// A table's address, which differs run to run, aside.
				if got, want := addr.ReplaceAllString(a.do(t, step...), "0x?"), addr.ReplaceAllString(b.do(t, step...), "0x?"); got != want {
					t.Errorf("%q: the engine answers %q, miniredis %q", step, got, want)
				}
			}
			if own, left := e.Scripts(); own < 40 || left < 5 {
				t.Errorf("%d scripts ran in the engine, %d left to miniredis: want most in the engine, and the fall-backs left", own, left)
			}
			if got, want := shared.Dump(), fresh.Dump(); got != want {
				t.Errorf("the data differs:\nengine:\n%s\nminiredis:\n%s", got, want)
			}
		})
	}
}

var addr = regexp.MustCompile(`0x[0-9a-f]+`)

func sha(s string) string {
	h := sha1Sum(s)
	return h
}

// TestScriptsAtomic runs scripts that read, wait on nothing and write back
// a counter, from several connections at once, beside plain INCRs: no
// increment is lost, as none is when each script holds the server.
func TestScriptsAtomic(t *testing.T) {
	m := miniredis.RunT(t)
	sharedlua.Install(m)
	const clients, rounds = 8, 200
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			c := dial(t, m)
			for range rounds {
				if i%2 == 0 {
					c.do(t, "EVAL", "local n = tonumber(redis.call('GET', 'n') or '0'); redis.call('SET', 'x', n); redis.call('SET', 'n', n + 1); return n", "0")
				} else {
					c.do(t, "INCR", "n")
				}
			}
		})
	}
	wg.Wait()
	if got, _ := m.Get("n"); got != strconv.Itoa(clients*rounds) {
		t.Errorf("n = %s after %d increments, half of them by scripts: want none lost", got, clients*rounds)
	}
}

func sha1Sum(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}
