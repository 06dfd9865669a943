package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// Server is a redis-server process started for one benchmark run: on a free
// loopback port, with persistence off, in a temporary directory of its own.
type Server struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan error
}

// StartServer starts redis-server (it must be on PATH) and returns once it
// answers PING. The caller must Close it.
func StartServer() (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("bench: redis-server is not installed (apt-get install -y redis-server): %w", err)
	}
	var errs []error
	// A port found free can be taken by someone else before redis-server
	// binds it; a few tries make that race harmless.
	for range 5 {
		s, err := start(bin)
		if err == nil {
			return s, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func start(bin string, extra ...string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bench-redis-")
	if err != nil {
		return nil, err
	}
	args := append([]string{
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--loglevel", "warning"}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = redistest.ChildProcAttr() // a crashed benchmark leaves no server behind
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	if err := s.waitReady(5 * time.Second); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls the server with PING until it answers PONG, it exits, or
// the time is up.
func (s *Server) waitReady(limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("bench: redis-server on %s exited at startup: %v", s.addr, err)
		default:
		}
		if reply, err := s.Command(context.Background(), "PING"); err == nil && reply == "+PONG" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: redis-server on %s did not answer PING within %v", s.addr, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	return os.RemoveAll(s.dir)
}

// Command sends one inline command on a connection of its own, outside any
// client pool (so that it is never counted with a benchmark's traffic), and
// returns the reply's first line, or the whole bulk reply for a bulk string.
func (s *Server) Command(ctx context.Context, args ...string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	var req strings.Builder
	fmt.Fprintf(&req, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&req, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(req.String())); err != nil {
		return "", err
	}
	rd := bufio.NewReader(conn)
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "-"):
		return "", errors.New(line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := readFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return line, nil
}

func readFull(rd *bufio.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := rd.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// CommandStats returns the calls per command from INFO commandstats (the
// INFO and CONFIG calls themselves excluded). Commands that scripts call count
// too: the server counts them as it counts the commands clients send.
func (s *Server) CommandStats(ctx context.Context) (map[string]int64, error) {
	text, err := s.Command(ctx, "INFO", "commandstats")
	if err != nil {
		return nil, err
	}
	stats := make(map[string]int64)
	for line := range strings.SplitSeq(text, "\r\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || line == name {
			continue
		}
		if name == "info" || strings.HasPrefix(name, "config") {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bench: INFO commandstats line %q: %w", line, err)
		}
		stats[name] = n
	}
	return stats, nil
}

// CPU returns the CPU time the server has used, user and system, in seconds
// (INFO cpu).
func (s *Server) CPU(ctx context.Context) (float64, error) {
	text, err := s.Command(ctx, "INFO", "cpu")
	if err != nil {
		return 0, err
	}
	var total float64
	for line := range strings.SplitSeq(text, "\r\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "used_cpu_user" && name != "used_cpu_sys") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return 0, fmt.Errorf("bench: INFO cpu line %q: %w", line, err)
		}
		total += v
	}
	return total, nil
}

// Version returns the server's version, from INFO server.
func (s *Server) Version(ctx context.Context) (string, error) {
	text, err := s.Command(ctx, "INFO", "server")
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(text, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return v, nil
		}
	}
	return "", errors.New("bench: INFO server has no redis_version")
}
