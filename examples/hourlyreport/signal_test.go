package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// childEnv makes the test binary run the command's main instead of the
// tests, with the arguments after -args.
const childEnv = "HOURLYREPORT_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		for i, a := range os.Args {
			if a == "-args" {
				os.Args = append([]string{os.Args[0]}, os.Args[i+1:]...)
				break
			}
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSecondSignalExitsAtOnce runs the command as a child process with a
// report that takes 6 s, interrupts it while the report runs, and
// interrupts it again during the shutdown's grace: it must exit at once,
// with a non-zero status, instead of waiting for the report.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-args", "-hour", "1m", "-replicas", "1")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = redistest.ChildProcAttr()
	var stderr syncBuilder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	exited := make(chan struct{}) // waitErr is set
	lines := make(chan string)
	go func() {
		defer close(exited)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			lines <- s.Text()
		}
		close(lines)
		waitErr = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for range lines {
		}
		<-exited
	})

	var out []string
	waitFor := func(prefix string) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the command ended before printing %q; output:\n%s\nstderr:\n%s", prefix, strings.Join(out, "\n"), stderr.String())
				}
				out = append(out, l)
				if strings.HasPrefix(l, prefix) {
					return
				}
			case <-timeout:
				t.Fatalf("no line %q after 30s; output:\n%s", prefix, strings.Join(out, "\n"))
			}
		}
	}
	waitFor("interval 1 at") // the report is running, for 6 s
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	waitFor("shutting down") // waiting for the report
	sent := time.Now()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range lines {
		}
	}()
	select {
	case <-exited:
		took := time.Since(sent)
		var exit *exec.ExitError
		if !errors.As(waitErr, &exit) {
			t.Errorf("after a second SIGINT the command exited with %v, want a non-zero status", waitErr)
		}
		if took > 2*time.Second {
			t.Errorf("the command exited %v after a second SIGINT, want at once", took)
		}
		if !strings.Contains(stderr.String(), "second signal") {
			t.Errorf("stderr = %q, want it to say that a second signal ended the shutdown", stderr.String())
		}
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, on stderr
		<-exited
		t.Fatalf("the command still ran 5s after a second SIGINT; stderr:\n%s", stderr.String())
	}
}

// syncBuilder is a strings.Builder that a child process's output can be
// written to while the test reads it.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
