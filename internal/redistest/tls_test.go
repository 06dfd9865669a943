package redistest

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestStartTLS starts a TLS-only server: its client speaks TLS with the
// test's certificates, nothing answers in the clear, a client that does not
// trust the authority or presents another authority's certificate is
// refused, and a restart keeps all of it.
func TestStartTLS(t *testing.T) {
	s := StartTLS(t)
	ctx := t.Context()
	files, ok := s.TLS()
	if !ok || files.CA == "" || files.ClientCert == "" {
		t.Fatalf("TLS() = %+v, %v; want the files", files, ok)
	}
	if _, ok := Start(t).TLS(); ok {
		t.Errorf("TLS() of a plain server reports TLS")
	}
	check := func(t *testing.T) {
		t.Helper()
		c := s.Client(t)
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatalf("SET over TLS = %v", err)
		}
		if pid, err := serverPid(s.Addr(), s.TLSConfig(), time.Second); err != nil || pid != s.Pid() {
			t.Errorf("INFO over TLS: pid %d, %v; want %d", pid, err, s.Pid())
		}
		if _, err := serverPid(s.Addr(), nil, time.Second); err == nil {
			t.Errorf("a plain INFO on the TLS port was answered")
		}
	}
	check(t)

	for _, tc := range []struct {
		name string
		conf func() *tls.Config
	}{
		{"no trust in the authority", func() *tls.Config { return &tls.Config{MinVersion: tls.VersionTLS12} }},
		{"another authority's client certificate", func() *tls.Config {
			other, err := makeCerts(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			oc, err := clientTLS(other)
			if err != nil {
				t.Fatal(err)
			}
			c := s.TLSConfig()
			c.Certificates = oc.Certificates
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := s.Options()
			opts.TLSConfig, opts.MaxRetries = tc.conf(), -1
			c := redis.NewClient(opts)
			defer c.Close()
			if err := c.Ping(ctx).Err(); err == nil {
				t.Errorf("PING = nil, want the handshake refused")
			}
		})
	}
	t.Run("no client certificate", func(t *testing.T) {
		opts := s.Options()
		opts.TLSConfig.Certificates = nil
		c := redis.NewClient(opts)
		defer c.Close()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Errorf("PING without a client certificate = %v, want it let in (optional)", err)
		}
	})

	s.Restart(t)
	check(t)
}

// TestStartTLSRequired starts a TLS server that requires a client
// certificate: a client without one is refused.
func TestStartTLSRequired(t *testing.T) {
	s := StartTLS(t, "--tls-auth-clients", "yes")
	opts := s.Options()
	opts.TLSConfig.Certificates, opts.MaxRetries = nil, -1
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.Ping(t.Context()).Err(); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("PING without a client certificate = %v, want the connection refused", err)
	}
	if err := s.Client(t).Ping(t.Context()).Err(); err != nil {
		t.Errorf("PING with the client certificate = %v", err)
	}
}
