package main

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/cron"
	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
	"github.com/wakuwaku-go/wakuwaku/lock"
)

// wk runs the tool with args as they are, and returns its status and
// output.
func wk(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errs strings.Builder
	code := run(t.Context(), args, &out, &errs)
	return code, out.String(), errs.String()
}

// pointer is the line after a usage error's.
const pointer = "Run 'wakuwaku -h' for usage.\n"

// TestUsageErrors checks that each command line that can't be run gets
// one line saying what was wrong, then the pointer to -h, and status 2:
// never the whole usage, never a flag ignored. None needs Redis.
func TestUsageErrors(t *testing.T) {
	pem := filepath.Join(t.TempDir(), "ca.pem")
	for _, tc := range []struct {
		name string
		args []string
		want string // in the first line
	}{
		{"no command", nil, "no command: want one of status, pause, resume, run, locks, release"},
		{"unknown command", []string{"frobnicate"}, `no command "frobnicate"`},
		{"pause without a job", []string{"pause"}, "pause takes one job name, got 0"},
		{"pause with two jobs", []string{"pause", "a", "b"}, `pause takes one job name, got 2: "a" "b"`},
		{"run without a job", []string{"run", "-timeout", "5s"}, "run takes one job name, got 0"},
		{"status with two jobs", []string{"status", "a", "b"}, "status takes one job at most, got 2"},
		{"locks with an argument", []string{"locks", "invoice"}, `locks takes no arguments, got "invoice"`},
		{"release without a key", []string{"release", "-force"}, "release takes one key, got 0"},
		{"unknown flag before the command", []string{"-verbose", "status"}, "flag provided but not defined: -verbose"},
		{"unknown flag after the command", []string{"status", "-verbose"}, "status: flag provided but not defined: -verbose"},
		{"another command's flag", []string{"pause", "report", "-json"}, "pause: flag provided but not defined: -json"},
		{"another command's flag before the job", []string{"resume", "-force", "report"}, "resume: flag provided but not defined: -force"},
		{"the tool's flag without its value", []string{"status", "-redis"}, "flag needs an argument: -redis"},
		{"a bad timeout", []string{"status", "-timeout", "soon"}, `invalid value "soon" for flag -timeout`},
		{"a timeout of 0", []string{"status", "-timeout", "0s"}, "-timeout 0s: want more than 0"},
		{"both Redises", []string{"-redis", "redis://a:1", "status", "-cluster", "redis://b:1"}, "-redis and -cluster both given"},
		{"a certificate without its key", []string{"status", "-redis", "rediss://a:1", "-cert", pem}, "-cert and -key go together"},
		{"TLS files without TLS", []string{"status", "-redis", "redis://a:1", "-cacert", pem}, "want a rediss:// URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := wk(t, tc.args...)
			lines := strings.SplitAfter(errs, "\n")
			if code != 2 || out != "" || len(lines) != 3 || !strings.HasPrefix(lines[0], "wakuwaku: ") ||
				!strings.Contains(lines[0], tc.want) || lines[1] != pointer {
				t.Errorf("wakuwaku %q = %d, stdout %q, stderr %q; want 2, one line with %q, then %q", tc.args, code, out, errs, tc.want, pointer)
			}
		})
	}
}

// TestHelp checks that -h, wherever it comes, prints the usage on stdout
// with status 0.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"-help"}, {"help"}, {"status", "-h"}, {"pause", "report", "-h"}} {
		code, out, errs := wk(t, args...)
		if code != 0 || errs != "" || !strings.HasPrefix(out, "usage: wakuwaku") || !strings.Contains(out, "release [-force] KEY") || !strings.Contains(out, "-cacert") {
			t.Errorf("wakuwaku %q = %d, stdout %q, stderr %q; want 0 and the usage on stdout", args, code, out, errs)
		}
	}
}

// TestFlagsAfterTheCommand gives -redis (and -timeout) among a command's
// arguments: the tool talks to that Redis, as with the flags before the
// command, and not to the default 127.0.0.1:6379.
func TestFlagsAfterTheCommand(t *testing.T) {
	srv := redistest.Start(t)
	startReport(t, srv, 1)
	url := "redis://" + srv.Addr()
	admin := cron.NewAdmin(lock.NewDB(srv.Client(t)))
	paused := func() bool {
		t.Helper()
		st, err := admin.Status(t.Context(), "hourly-report")
		if err != nil {
			t.Fatal(err)
		}
		return st.Paused
	}

	for _, tc := range []struct {
		args   []string
		want   string // in stdout
		paused bool   // the job's pause afterwards
	}{
		{[]string{"status", "-redis", url}, "hourly-report", false},
		{[]string{"status", "hourly-report", "-json", "-redis", url}, `"job": "hourly-report"`, false},
		{[]string{"pause", "hourly-report", "-redis", url}, "hourly-report: paused\n", true},
		{[]string{"resume", "-redis", url, "hourly-report", "-timeout", "5s"}, "hourly-report: resumed\n", false},
		{[]string{"-timeout", "5s", "pause", "-redis", url, "--", "hourly-report"}, "hourly-report: paused\n", true},
		{[]string{"-redis", "redis://127.0.0.1:1", "resume", "hourly-report", "-redis", url}, "hourly-report: resumed\n", false},
		{[]string{"locks", "-redis", url, "-namespace", "cron"}, "hourly-report", false},
	} {
		code, out, errs := wk(t, tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) {
			t.Errorf("wakuwaku %q = %d, %q, %q; want 0 and %q", tc.args, code, out, errs, tc.want)
		}
		if got := paused(); got != tc.paused {
			t.Errorf("after wakuwaku %q the job is paused %v, want %v", tc.args, got, tc.paused)
		}
	}
	// A job whose name begins with a dash goes after --: this one has no
	// record.
	if code, _, errs := wk(t, "status", "-redis", url, "--", "-odd"); code != 1 || !strings.Contains(errs, `no such job "-odd": no record of the job: no replica runs it`) {
		t.Errorf("status -- -odd = %d, %q; want 1 and no record of -odd", code, errs)
	}
}

// TestParse checks what the command line says, the global flags before
// and after the command alike.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want invocation
	}{
		{[]string{"status"}, invocation{g: globals{url: "redis://127.0.0.1:6379", timeout: 10 * time.Second}, cmd: "status"}},
		{[]string{"status", "-timeout", "200ms", "-json", "report"},
			invocation{g: globals{url: "redis://127.0.0.1:6379", timeout: 200 * time.Millisecond}, cmd: "status", args: []string{"report"}, asJSON: true}},
		{[]string{"-redis", "rediss://a:1", "release", "KEY", "-force", "-cacert", "ca.pem", "-cert", "c.pem", "-key", "k.pem"},
			invocation{g: globals{url: "rediss://a:1", timeout: 10 * time.Second, cacert: "ca.pem", cert: "c.pem", key: "k.pem"}, cmd: "release", args: []string{"KEY"}, force: true}},
		{[]string{"locks", "-cluster", "redis://a:1?addr=b:2", "-namespace", "invoice"},
			invocation{g: globals{url: "redis://127.0.0.1:6379", clusterURL: "redis://a:1?addr=b:2", timeout: 10 * time.Second}, cmd: "locks", namespace: "invoice"}},
		{[]string{"-timeout", "1s", "pause", "--", "-odd"},
			invocation{g: globals{url: "redis://127.0.0.1:6379", timeout: time.Second}, cmd: "pause", args: []string{"-odd"}}},
	} {
		inv, err := parse(tc.args)
		if err != nil {
			t.Errorf("parse(%q) = %v", tc.args, err)
			continue
		}
		if got := *inv; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parse(%q) = %+v, want %+v", tc.args, got, tc.want)
		}
	}
	// After --, a flag is an argument.
	if _, err := parse([]string{"pause", "--", "-odd", "-timeout", "2s"}); err == nil || !strings.Contains(err.Error(), `got 3: "-odd" "-timeout" "2s"`) {
		t.Errorf("parse(pause -- -odd -timeout 2s) = %v, want three job names refused", err)
	}
}
