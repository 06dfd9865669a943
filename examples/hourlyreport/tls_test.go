package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// TestTLS runs the command, as a child process, against a redis-server
// that speaks TLS only, over a rediss:// URL: the way a service is told of
// a private certificate authority without a line of code, SSL_CERT_FILE,
// makes it trust the server. Every interval is run by one replica, and the
// job's record is read back over TLS.
func TestTLS(t *testing.T) {
	srv := redistest.StartTLS(t)
	files, _ := srv.TLS()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-args",
		"-redis", "rediss://"+srv.Addr(), "-hour", "300ms", "-duration", "3s", "-replicas", "2")
	cmd.Env = append(os.Environ(), childEnv+"=1", "SSL_CERT_FILE="+files.CA)
	cmd.SysProcAttr = redistest.ChildProcAttr()
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	if err != nil {
		t.Fatalf("hourlyreport over rediss:// = %v; stderr:\n%s\noutput:\n%s", err, stderr, out)
	}
	text := string(out)
	intervals := regexp.MustCompile(`(?m)^interval \d+ at +[\d.]+s: report by replica-\d`).FindAllString(text, -1)
	if len(intervals) < 3 {
		t.Errorf("%d interval lines in 10 intervals; output:\n%s", len(intervals), text)
	}
	for _, want := range []string{"the job's record in Redis: last run by replica-", "all replicas stopped"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}

	// Without the authority, it says in one line why it can't start, and
	// starts no replica. (A -duration shorter than the 5 s it gives Redis to
	// answer would bound that too, and go-redis, retrying its dials, would
	// report the deadline instead of the certificate.)
	cmd = exec.Command(os.Args[0], "-test.run=^$", "-args", "-redis", "rediss://"+srv.Addr(), "-duration", "1m")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = redistest.ChildProcAttr()
	out, err = cmd.Output()
	stderr = ""
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(stderr, "certificate signed by unknown authority") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("hourlyreport over rediss:// without the authority = %v, stderr %q, output %q; want status 1 and one line with the certificate's error", err, stderr, out)
	}
	if strings.Contains(string(out), "started") {
		t.Errorf("hourlyreport started replicas without reaching Redis:\n%s", out)
	}
}
