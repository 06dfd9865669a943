package crontest

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// This file holds the in-memory connection between a replica's Redis
// client and the cluster's miniredis. net.Pipe, which miniredis's Dial
// uses, hands each write to the reader synchronously: the writer waits
// until the reader has taken every byte, and miniredis flushes after each
// command of a pipeline. A stream whose writes never wait costs fewer
// goroutine switches per command. Its reads block on a channel made in the
// bubble, so a client or a server waiting for bytes is durably blocked and
// the bubble's clock moves on.

// dial returns the client's end of a fresh connection to the cluster's
// Redis, whose server end miniredis serves.
func (c *Cluster) dial() (net.Conn, error) {
	client, server := memPipe()
	c.redis.Server().ServeConn(server)
	return client, nil
}

// memPipe returns the two ends of an in-memory, full-duplex connection
// whose writes are buffered.
func memPipe() (net.Conn, net.Conn) {
	a, b := newStream(), newStream()
	return &memConn{r: a, w: b}, &memConn{r: b, w: a}
}

// stream is one direction of a memConn: the bytes written and not read
// yet.
type stream struct {
	mu     sync.Mutex
	buf    []byte
	closed bool
	ready  chan struct{} // holds a token while buf has bytes or closed is set
}

func newStream() *stream {
	return &stream{ready: make(chan struct{}, 1)}
}

// signal makes a waiting reader look again. s.mu is held.
func (s *stream) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *stream) read(p []byte) (int, error) {
	for {
		s.mu.Lock()
		if len(s.buf) > 0 {
			n := copy(p, s.buf)
			s.buf = s.buf[n:]
			if len(s.buf) == 0 {
				s.buf = s.buf[:0:0] // drop the array once read: no growth without bound
			} else {
				s.signal()
			}
			s.mu.Unlock()
			return n, nil
		}
		if s.closed {
			s.mu.Unlock()
			return 0, io.EOF
		}
		s.mu.Unlock()
		<-s.ready
	}
}

func (s *stream) write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, io.ErrClosedPipe
	}
	s.buf = append(s.buf, p...)
	s.signal()
	return len(p), nil
}

func (s *stream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.signal()
}

// memConn is one end of a memPipe: it reads r and writes w. Its deadlines
// are not kept: the server answers every command at the instant it reads
// it, and the cluster's faults that hold a command (RedisStall, Freeze)
// hold it in the client's hook, under the command's context.
type memConn struct {
	r, w *stream
}

func (c *memConn) Read(p []byte) (int, error) { return c.r.read(p) }

func (c *memConn) Write(p []byte) (int, error) { return c.w.write(p) }

// Close closes both directions: the other end reads what was written,
// then EOF, and its writes fail.
func (c *memConn) Close() error {
	c.r.close()
	c.w.close()
	return nil
}

func (c *memConn) LocalAddr() net.Addr  { return memAddr{} }
func (c *memConn) RemoteAddr() net.Addr { return memAddr{} }

func (c *memConn) SetDeadline(time.Time) error      { return c.deadline() }
func (c *memConn) SetReadDeadline(time.Time) error  { return c.deadline() }
func (c *memConn) SetWriteDeadline(time.Time) error { return c.deadline() }

// deadline fails on a closed connection, as net.Pipe's deadlines do, and
// otherwise does nothing.
func (c *memConn) deadline() error {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if c.r.closed {
		return os.ErrClosed
	}
	return nil
}

// memAddr is a memConn's address.
type memAddr struct{}

func (memAddr) Network() string { return "memory" }
func (memAddr) String() string  { return "memory" }
