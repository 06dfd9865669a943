package fault

import (
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards TCP connections from its own loopback address to a target
// (a redis-server), and injects network faults on command:
//
//   - latency: every chunk of bytes is delivered a fixed delay plus a random
//     jitter after it was read, in order;
//   - blackhole: nothing is delivered in either direction, new connections
//     included, while the connections stay open, as in a network partition;
//     the bytes wait, as TCP retransmits them, and flow again on heal;
//   - cut: every open connection is closed on both sides at once.
//
// Its methods are safe for concurrent use. The test's cleanup closes the
// listener and every connection, and waits for the proxy's goroutines.
type Proxy struct {
	l      net.Listener
	target string

	latency, jitter atomic.Int64 // time.Duration

	mu      sync.Mutex
	links   map[*link]struct{}
	healed  chan struct{} // nil while traffic flows; closed on heal
	closed  bool
	wg      sync.WaitGroup
	cuts    atomic.Int64
	holes   atomic.Int64
	accepts atomic.Int64
}

// link is one proxied connection: the client's side and the server's.
type link struct {
	client, server net.Conn
	once           sync.Once
}

func (k *link) close() {
	k.once.Do(func() {
		k.client.Close()
		k.server.Close()
	})
}

// NewProxy starts a proxy to target on a free 127.0.0.1 port.
func NewProxy(tb testing.TB, target string) *Proxy {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("fault: proxy listen: %v", err)
	}
	p := &Proxy{l: l, target: target, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	tb.Cleanup(p.close)
	return p
}

// Addr returns the address clients dial instead of the target's.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// SetLatency delays every chunk by base plus a uniformly random part of
// jitter, from the next chunk on. Zero for both turns latency off.
func (p *Proxy) SetLatency(base, jitter time.Duration) {
	p.latency.Store(int64(base))
	p.jitter.Store(int64(jitter))
}

// Blackhole stops all traffic through the proxy, until Heal. Calling it while
// traffic is already stopped does nothing.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed == nil {
		p.healed = make(chan struct{})
		p.holes.Add(1)
	}
}

// Heal lets traffic flow again after Blackhole, starting with the bytes that
// waited. Healing a proxy that is not blackholed does nothing.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.healed != nil {
		close(p.healed)
		p.healed = nil
	}
}

// Cut closes every open connection, on both sides, and returns how many it
// closed. Clients see their connections reset and dial again; new
// connections go through as before.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.links {
		k.close()
	}
	p.cuts.Add(1)
	return len(p.links)
}

// ProxyStats counts what a proxy did.
type ProxyStats struct {
	Conns      int64 // connections accepted
	Blackholes int64 // calls to Blackhole that stopped traffic
	Cuts       int64 // calls to Cut
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{Conns: p.accepts.Load(), Blackholes: p.holes.Load(), Cuts: p.cuts.Load()}
}

func (p *Proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.l.Close()
	for k := range p.links {
		k.close()
	}
	if p.healed != nil {
		close(p.healed)
		p.healed = nil
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.accepts.Add(1)
		// A partition also swallows the handshake: the client's connection
		// is accepted here, but nothing reaches Redis until the heal.
		if !p.wait(nil) {
			c.Close()
			return
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		k := &link{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			k.close()
			return
		}
		p.links[k] = struct{}{}
		p.mu.Unlock()
		var both sync.WaitGroup
		both.Add(2)
		p.wg.Add(2)
		go p.pipe(k, c, s, &both)
		go p.pipe(k, s, c, &both)
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			both.Wait()
			p.mu.Lock()
			delete(p.links, k)
			p.mu.Unlock()
		}()
	}
}

// wait blocks while the proxy is blackholed. It reports false if the proxy
// closed or done did.
func (p *Proxy) wait(done <-chan struct{}) bool {
	for {
		p.mu.Lock()
		h, closed := p.healed, p.closed
		p.mu.Unlock()
		switch {
		case closed:
			return false
		case h == nil:
			return true
		}
		select {
		case <-h:
		case <-done:
			return false
		}
	}
}

// chunk is bytes read from one side, due on the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// pipe forwards src to dst: one goroutine reads and stamps each chunk with
// its due time, this one delivers the chunks in order, waiting out latency
// and blackholes. Either side failing closes the whole link.
func (p *Proxy) pipe(k *link, src, dst net.Conn, both *sync.WaitGroup) {
	defer p.wg.Done()
	defer both.Done()
	defer k.close()
	chunks := make(chan chunk, 64)
	done := make(chan struct{})
	defer close(done)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(chunks)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				due := time.Now().Add(p.delay())
				select {
				case chunks <- chunk{buf[:n], due}:
				case <-done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range chunks {
		if !p.wait(done) {
			return
		}
		if d := time.Until(c.due); d > 0 {
			time.Sleep(d)
		}
		if _, err := dst.Write(c.b); err != nil {
			return
		}
	}
}

func (p *Proxy) delay() time.Duration {
	d := time.Duration(p.latency.Load())
	if j := p.jitter.Load(); j > 0 {
		d += time.Duration(rand.Int64N(j))
	}
	return d
}
