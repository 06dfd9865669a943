package bench

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"syscall"
)

// Counter counts the writes on the connections its dialer made. go-redis
// writes each command it sends in one write and then waits for the reply,
// so writes are round trips, and commands sent. A pipeline, such as a batch
// of go-redis's AutoPipeliner, goes in one write too: then a round trip
// carries many commands.
type Counter struct {
	writes atomic.Int64
}

// Writes returns the number of writes so far.
func (c *Counter) Writes() int64 { return c.writes.Load() }

// Dial is a go-redis Options.Dialer that counts the writes of the
// connections it makes.
func (c *Counter) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: conn, n: &c.writes}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.n.Add(1)
	return c.Conn.Write(p)
}

// SyscallConn passes the raw connection through, so that go-redis checks a
// pooled connection's health exactly as it does on an unwrapped one.
func (c *countingConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	return sc.SyscallConn()
}
