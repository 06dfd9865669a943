package bench

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// Cluster is a Redis Cluster of masters only, each a Server, started for
// one benchmark run; the hash slots are split evenly among them.
type Cluster struct {
	Nodes []*Server
}

// StartCluster starts masters redis-servers in cluster mode, gives each an
// even share of the 16,384 hash slots, and returns once every node reports
// the cluster's state ok. The caller must Close it.
func StartCluster(masters int) (*Cluster, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("bench: redis-server is not installed (apt-get install -y redis-server): %w", err)
	}
	c := &Cluster{}
	for range masters {
		var s *Server
		var errs []error
		for range 5 {
			if s, err = start(bin, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000"); err == nil {
				break
			}
			errs = append(errs, err)
		}
		if s == nil {
			c.Close()
			return nil, errors.Join(errs...)
		}
		c.Nodes = append(c.Nodes, s)
	}
	ctx := context.Background()
	const slots = 16384
	for i, s := range c.Nodes {
		lo, hi := i*slots/masters, (i+1)*slots/masters-1
		if _, err := s.Command(ctx, "CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			c.Close()
			return nil, fmt.Errorf("bench: CLUSTER ADDSLOTSRANGE on %s: %w", s.addr, err)
		}
		if i > 0 {
			host, port, _ := strings.Cut(c.Nodes[0].addr, ":")
			if _, err := s.Command(ctx, "CLUSTER", "MEET", host, port); err != nil {
				c.Close()
				return nil, fmt.Errorf("bench: CLUSTER MEET from %s: %w", s.addr, err)
			}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for _, s := range c.Nodes {
			info, err := s.Command(ctx, "CLUSTER", "INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(masters)) {
				ok = false
			}
		}
		if ok {
			return c, nil
		}
		if time.Now().After(deadline) {
			c.Close()
			return nil, errors.New("bench: the cluster did not reach state ok within 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addrs returns the nodes' host:port.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Nodes {
		out = append(out, s.addr)
	}
	return out
}

// Close stops every node.
func (c *Cluster) Close() error {
	var errs []error
	for _, s := range c.Nodes {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}
