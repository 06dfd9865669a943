package lock_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// cutProxy forwards connections to a Redis server and, once armed, cuts the
// connection that carries the next command naming the marker, right after the
// server answered it, so that the client never sees the reply and retries.
type cutProxy struct {
	l      net.Listener
	target string
	marker atomic.Value // []byte
	armed  atomic.Bool
	seen   atomic.Int64 // commands naming the marker forwarded
	wg     sync.WaitGroup
}

// arm makes the proxy cut the next command that names marker.
func (p *cutProxy) arm(marker string) {
	p.seen.Store(0)
	p.marker.Store([]byte(marker))
	p.armed.Store(true)
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: target}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() { l.Close(); p.wg.Wait() })
	return p
}

func (p *cutProxy) Addr() string { return p.l.Addr().String() }

func (p *cutProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		var cut atomic.Bool // this connection carried the SET to cut
		p.wg.Add(2)
		go func() { // client to server
			defer p.wg.Done()
			defer s.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					if m, _ := p.marker.Load().([]byte); m != nil && bytes.Contains(buf[:n], m) {
						p.seen.Add(1)
						if p.armed.CompareAndSwap(true, false) {
							cut.Store(true)
						}
					}
					if _, werr := s.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // server to client
			defer p.wg.Done()
			defer c.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := s.Read(buf)
				if n > 0 && cut.Load() {
					return // the reply is lost with the connection
				}
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil && err != io.EOF {
					return
				}
				if err == io.EOF {
					return
				}
			}
		}()
	}
}

// TestRetriedAcquire cuts the connection after Redis executed TryLock's command
// and before its reply arrived. The client retries; the retry must hand the
// caller its token, not report the lock busy while it holds it itself.
func TestRetriedAcquire(t *testing.T) {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	proxy := newCutProxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: 3})
	t.Cleanup(func() { c.Close() })
	ctx := t.Context()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	// The control: a plain SET NX PX, as other lock libraries send it, reports
	// the lock busy after the retry, though its first attempt took it.
	proxy.arm("control")
	ok, err := c.SetNX(ctx, "control", "mine", time.Minute).Result()
	if proxy.seen.Load() < 2 {
		t.Fatalf("the proxy saw %d attempts, want the client to retry", proxy.seen.Load())
	}
	if ok || err != nil {
		t.Fatalf("control SetNX = %v, %v; want false: the test no longer reproduces the lost reply", ok, err)
	}

	db := lockDB(c)
	warm, _ := invoices.TryLock(ctx, db, 6) // caches the script: the cut hits EVALSHA
	warm.Release(ctx)
	proxy.arm(invoices.Key(7))
	tok, err := invoices.TryLock(ctx, db, 7)
	if n := proxy.seen.Load(); n < 2 {
		t.Fatalf("the proxy saw %d attempts, want the client to retry", n)
	}
	if tok == nil || err != nil {
		t.Fatalf("TryLock after a lost reply = %v, %v, want the token", tok, err)
	}
	if got := raw.Get(ctx, invoices.Key(7)).Val(); len(got) != 16 {
		t.Fatalf("key holds %q", got)
	}
	if ok, err := tok.Release(ctx); !ok || err != nil {
		t.Errorf("Release = %v, %v, want true: the token must be the holder's", ok, err)
	}
	if n := raw.Exists(ctx, invoices.Key(7)).Val(); n != 0 {
		t.Errorf("key still exists after Release")
	}
}
