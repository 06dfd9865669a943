package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

const (
	// readyTimeout bounds how long a starting server may take to answer.
	readyTimeout = 10 * time.Second
	// startAttempts bounds the retries when a picked port turns out to be taken.
	startAttempts = 5
	// signalTimeout bounds how long Pause and Resume wait for the signal to take effect.
	signalTimeout = 2 * time.Second
	// logName is the file in a server's directory that receives its stdout and stderr.
	logName = "redis.log"
	// logTailLines is how much of the log a failure message quotes.
	logTailLines = 40
)

// installHint is the message of every failure caused by a missing redis-server binary.
const installHint = "redistest: redis-server is not on PATH; tests talk to a real Redis, " +
	"so install it with `apt-get update && apt-get install -y redis-server` " +
	"(or run the test command in the README)"

// errExited means the server process ended before it answered.
var errExited = errors.New("redis-server exited")

// errPortTaken means something other than our process answered on the picked port.
var errPortTaken = errors.New("port answered by another process")

// Server is one real redis-server process listening on a free loopback port, started by Start
// with persistence off (--save "" --appendonly no). Its methods are safe for concurrent use.
// The test's cleanup stops the process (resuming it first if it is paused) and removes its
// working directory, which holds the server's log, any dump file and, for a cluster node,
// nodes.conf.
type Server struct {
	bin     string
	dir     string
	args    []string // every argument but the port, which goes last
	cluster bool
	port    int // set before Start returns and never changed afterwards

	tls      *tls.Config // a StartTLS server's client configuration; nil for Start's
	tlsFiles TLSFiles

	mu     sync.Mutex
	proc   *process // nil after Kill or cleanup
	pid    int      // of the latest process, even once it is gone
	paused bool
	admin  *redis.Client // the rig's own connection, made on first use
}

// process is one run of redis-server and the goroutine that reaps it.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been reaped
	err  error         // what Wait returned; read only after done is closed
}

// Start runs a redis-server on a free 127.0.0.1 port and returns once it answers. args are
// extra server arguments appended to the rig's own, for example "--maxmemory", "1mb". The
// process and its directory are removed by tb.Cleanup. Start fails the test (with the tail of
// the server's log) if the server does not answer within 10 seconds, and with installation
// instructions if redis-server is not on PATH.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	s := newServer(tb, serverBinary(tb), false, args)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.start(true); err != nil {
		tb.Fatalf("%v", err)
	}
	return s
}

// serverBinary finds redis-server or fails the test with how to install it.
func serverBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("%s (%v)", installHint, err)
	}
	return bin
}

// newServer prepares a server that is not running yet and registers its cleanup, which is
// therefore in place before any process exists.
func newServer(tb testing.TB, bin string, cluster bool, extra []string) *Server {
	tb.Helper()
	dir := tb.TempDir()
	args := []string{
		"--bind", "127.0.0.1",
		"--daemonize", "no",
		"--save", "",
		"--appendonly", "no",
		"--dir", dir,
		"--dbfilename", "dump.rdb",
		"--logfile", "", // stdout, which goes to the log file
	}
	if cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(dir, nodesConf),
			"--cluster-node-timeout", "5000",
			// Without it a fresh node doesn't know its own address until a peer tells it.
			"--cluster-announce-ip", "127.0.0.1",
		)
	}
	s := &Server{bin: bin, dir: dir, args: append(args, extra...), cluster: cluster}
	tb.Cleanup(s.stop)
	return s
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same across Restart.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Options returns new client options pointing at the server, for redis.NewClient, over TLS
// with the client certificate for a server started by StartTLS. The caller may change them
// freely; each call returns a fresh value.
func (s *Server) Options() *redis.Options {
	return &redis.Options{Addr: s.Addr(), TLSConfig: s.TLSConfig()}
}

// Client returns a new go-redis client for the server, made from Options. The test's cleanup
// closes it before the server stops.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(s.Options())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Pid returns the process id of the server's latest process. After Kill it is the id of the
// process that was killed; after Restart, that of the new one.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Dir returns the server's working directory, which holds its log file (redis.log). The
// directory is removed at cleanup.
func (s *Server) Dir() string {
	return s.dir
}

// Pause stops the server process with SIGSTOP, so that it keeps its connections open but
// answers nothing: commands time out rather than fail. It returns once the process is stopped.
// The test's cleanup resumes a paused server before stopping it. Pause fails the test if the
// server is not running.
func (s *Server) Pause(tb testing.TB) {
	tb.Helper()
	s.setStopped(tb, true)
}

// Resume continues a server stopped by Pause with SIGCONT and returns once it runs again.
// Resuming a server that is not paused does nothing. Resume fails the test if the server is
// not running.
func (s *Server) Resume(tb testing.TB) {
	tb.Helper()
	s.setStopped(tb, false)
}

// setStopped stops or continues the process and waits until it is (or is no longer) stopped.
func (s *Server) setStopped(tb testing.TB, stop bool) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.running(tb)
	if err := SetStopped(p.cmd.Process, stop, signalTimeout); err != nil {
		tb.Fatalf("%v (redis-server %s)", err, s.Addr())
	}
	s.paused = stop
}

// Kill ends the server process with SIGKILL and waits until it is gone, losing all its data.
// Killing a server that is not running does nothing. Restart starts it again. Until then,
// connecting is refused; note that go-redis clients retry dials and commands by default, so a
// test that wants a quick failure sets MaxRetries to -1 in its Options.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
}

// Restart starts the server again on the same port, killing the running process first if
// there is one, and returns once the new process answers PING. The restarted server is empty:
// the rig removes any data files before starting it. A cluster node keeps its nodes.conf, so
// it comes back with the same node id and slots and rejoins its cluster. Restart fails the
// test if the port can't be bound again or the server does not answer within 10 seconds.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
	if err := s.clearData(); err != nil {
		tb.Fatalf("redistest: restart %s: %v", s.Addr(), err)
	}
	if err := s.start(false); err != nil {
		tb.Fatalf("%v", err)
	}
}

// running returns the live process or fails the test. s.mu must be held.
func (s *Server) running(tb testing.TB) *process {
	tb.Helper()
	if s.proc == nil {
		tb.Fatalf("redistest: redis-server %s is not running (killed)", s.Addr())
	}
	select {
	case <-s.proc.done:
		tb.Fatalf("redistest: redis-server %s exited on its own (%v)\n%s", s.Addr(), s.proc.err, s.logTail())
	default:
	}
	return s.proc
}

// live reports whether the server is running and not paused, that is whether a command sent
// to it can be answered.
func (s *Server) live() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil || s.paused {
		return false
	}
	select {
	case <-s.proc.done:
		return false
	default:
		return true
	}
}

// adminClient returns the rig's own client for the server: no client-side extras, and
// context deadlines honoured so a paused server can't hang the rig.
func (s *Server) adminClient() *redis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.admin == nil {
		s.admin = redis.NewClient(&redis.Options{
			Addr:                  s.Addr(),
			TLSConfig:             s.TLSConfig(),
			Protocol:              2,
			DisableIdentity:       true,
			ContextTimeoutEnabled: true,
			ReadTimeout:           10 * time.Second, // above MIGRATE's own 5 s
			PoolSize:              2,
			MaintNotificationsConfig: &maintnotifications.Config{
				Mode: maintnotifications.ModeDisabled,
			},
		})
	}
	return s.admin
}

// stop is the cleanup: it resumes, kills and reaps the process and closes the rig's client.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kill()
	if s.admin != nil {
		_ = s.admin.Close()
		s.admin = nil
	}
}

// kill ends the current process, if any, and waits for it. s.mu must be held.
func (s *Server) kill() {
	if s.proc == nil {
		return
	}
	s.proc.kill()
	s.proc = nil
	s.paused = false
}

// kill resumes the process (a stopped process is killed too, but cleanup promises SIGCONT),
// kills it and waits until it is reaped. Errors mean the process is already gone.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(sigCont)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// start runs a new process and waits until it answers, retrying when the port turns out to be
// taken: with a newly picked port if pickPort, else on the same port after a pause (a
// restart must keep its address). s.mu must be held.
func (s *Server) start(pickPort bool) error {
	var err error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if pickPort {
			if s.port, err = freePort(s.cluster); err != nil {
				return err
			}
		} else if attempt > 1 {
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		}
		var p *process
		var logFrom int64
		if p, logFrom, err = s.spawn(); err != nil {
			return err
		}
		if err = p.waitReady(s.Addr(), s.tls); err == nil {
			s.proc, s.pid, s.paused = p, p.cmd.Process.Pid, false
			return nil
		}
		p.kill()
		taken := errors.Is(err, errPortTaken) ||
			errors.Is(err, errExited) && strings.Contains(s.logFrom(logFrom), "already in use")
		if !taken {
			break
		}
	}
	return fmt.Errorf("redistest: redis-server on %s did not start: %w\n--- tail of %s ---\n%s",
		s.Addr(), err, filepath.Join(s.dir, logName), s.logTail())
}

// spawn starts redis-server with its output appended to the log, and returns the log's size
// before this run so that the caller can read what this run wrote.
func (s *Server) spawn() (*process, int64, error) {
	f, err := os.OpenFile(filepath.Join(s.dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("redistest: %w", err)
	}
	defer f.Close() // the child has its own descriptor
	from, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, 0, fmt.Errorf("redistest: %w", err)
	}
	fmt.Fprintf(f, "### redistest %s: starting redis-server on port %d\n",
		time.Now().Format(time.RFC3339Nano), s.port)
	port := []string{"--port", strconv.Itoa(s.port)}
	if s.tls != nil {
		port = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port)}
	}
	cmd := exec.Command(s.bin, append(slices.Clone(s.args), port...)...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = ChildProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, 0, fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, from, nil
}

// waitReady polls the server until it answers INFO with its own pid, it exits, or the
// ready timeout passes. Checking the pid matters: when two tests race for one port, the loser
// must not mistake the winner's server for its own. A TLS server (tc not nil) is asked over
// TLS.
func (p *process) waitReady(addr string, tc *tls.Config) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		pid, err := serverPid(addr, tc, time.Second)
		switch {
		case err == nil && pid == p.cmd.Process.Pid:
			return nil
		case err == nil:
			return fmt.Errorf("%w (pid %d, ours is %d)", errPortTaken, pid, p.cmd.Process.Pid)
		}
		select {
		case <-p.done:
			return fmt.Errorf("%w: %v", errExited, p.err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %v: %v", readyTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serverPid asks the server at addr for its process id with a plain INFO, without a client
// library, so that nothing is configured or retried behind the rig's back; over TLS if tc is
// not nil.
func serverPid(addr string, tc *tls.Config, timeout time.Duration) (int, error) {
	var conn net.Conn
	var err error
	if tc != nil {
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, tc)
	} else {
		conn, err = net.DialTimeout("tcp", addr, timeout)
	}
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return 0, err
	}
	if _, err := io.WriteString(conn, "INFO server\r\n"); err != nil {
		return 0, err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return 0, err
	}
	line = strings.TrimRight(line, "\r\n")
	if msg, ok := strings.CutPrefix(line, "-"); ok {
		return 0, errors.New(msg) // for example LOADING
	}
	size, ok := strings.CutPrefix(line, "$")
	if !ok {
		return 0, fmt.Errorf("unexpected INFO reply %q", line)
	}
	n, err := strconv.Atoi(size)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("unexpected INFO reply %q", line)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, err
	}
	for l := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimRight(l, "\r\n"), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("no process_id in INFO reply")
}

// freePort returns a loopback port that was free a moment ago. A cluster node also needs its
// bus port, port+10000, so for one both must be free. Someone may take the port before the
// server binds it; start retries when that happens.
func freePort(cluster bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("redistest: pick a port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !cluster {
			return port, l.Close()
		}
		if port+busPortOffset > 65535 {
			l.Close()
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+busPortOffset)))
		l.Close()
		if err == nil {
			return port, bus.Close()
		}
	}
	return 0, errors.New("redistest: found no free port pair for a cluster node")
}

// clearData removes everything in the server's directory but its log and nodes.conf, so that
// a restarted server is empty whatever persistence its extra arguments turned on.
func (s *Server) clearData() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == logName || e.Name() == nodesConf {
			continue
		}
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// logFrom returns what the log holds from offset on.
func (s *Server) logFrom(offset int64) string {
	b, err := os.ReadFile(filepath.Join(s.dir, logName))
	if err != nil || offset > int64(len(b)) {
		return ""
	}
	return string(b[offset:])
}

// logTail returns the last lines of the server's log, for failure messages.
func (s *Server) logTail() string {
	b, err := os.ReadFile(filepath.Join(s.dir, logName))
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > logTailLines {
		lines = lines[len(lines)-logTailLines:]
	}
	return strings.Join(lines, "\n")
}
