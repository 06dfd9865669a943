package main

import (
	"strings"
	"testing"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// TestTLS runs the tool over rediss:// against a redis-server that speaks
// TLS only, with certificates the test made: it trusts the test's
// authority with -cacert, presents a client certificate with -cert and
// -key, and says in one line why it can't connect without the authority or
// without TLS.
func TestTLS(t *testing.T) {
	srv := redistest.StartTLS(t)
	files, _ := srv.TLS()
	startReport(t, srv, 1) // over TLS: srv's clients are
	url := "rediss://" + srv.Addr()
	trusted := []string{"-redis", url, "-cacert", files.CA}
	withCert := append(trusted[:4:4], "-cert", files.ClientCert, "-key", files.ClientKey)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout, or in stderr's one line if code is not 0
	}{
		{"status", append(withCert, "status"), 0, "hourly-report"},
		{"flags after the command", append([]string{"status", "hourly-report", "-json"}, withCert...), 0, `"job": "hourly-report"`},
		{"pause", append(withCert, "pause", "hourly-report"), 0, "hourly-report: paused"},
		{"resume without a client certificate", append(trusted, "resume", "hourly-report"), 0, "hourly-report: resumed"},
		{"locks", append(trusted, "locks"), 0, "Lock"},
		{"the system's authorities", []string{"-redis", url, "status"}, 1, "certificate signed by unknown authority"},
		{"a file without a certificate", []string{"-redis", url, "-cacert", files.ClientKey, "status"}, 1, "no PEM certificate in it"},
		{"a missing file", []string{"-redis", url, "-cacert", files.CA + ".missing", "status"}, 1, "no such file"},
		{"without TLS", []string{"-redis", "redis://" + srv.Addr(), "-timeout", "3s", "status"}, 1, "the server closed the connection; if it speaks TLS only, give a rediss:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := wk(t, tc.args...)
			got := out
			if tc.code != 0 {
				got = errs
				if strings.Count(errs, "\n") != 1 {
					t.Errorf("stderr %q: want one line", errs)
				}
			}
			if code != tc.code || !strings.Contains(got, tc.want) {
				t.Errorf("wakuwaku %q = %d, %q, %q; want %d and %q", tc.args, code, out, errs, tc.code, tc.want)
			}
		})
	}
}
