package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

// The environment through which a test process tells a re-executed copy of
// itself which role to play.
const (
	envRole  = "WAKUWAKU_FAULT_ROLE"
	envCoord = "WAKUWAKU_FAULT_COORD"
	envChild = "WAKUWAKU_FAULT_CHILD"
	envArgs  = "WAKUWAKU_FAULT_ARGS"
)

const (
	// stopTimeout bounds how long Stop waits for a child to finish.
	stopTimeout = 60 * time.Second
	// signalTimeout bounds how long Pause and Resume wait for the signal to
	// take effect.
	signalTimeout = 5 * time.Second
	// outputLimit is how much of a child's output is kept for failures.
	outputLimit = 64 << 10
)

// Role is what a child process does: it runs until its work is done or ctx
// ends (when the test process calls [Child.Stop], or dies), and its error
// makes the child exit with status 1.
type Role func(ctx context.Context, env *Env) error

// Env is what a role is given: its child number, its link to the test
// process, and its arguments.
type Env struct {
	Child int
	Link  *Link
	args  []byte
}

// Args decodes the role's arguments, as given to [Spawn], into v.
func (e *Env) Args(v any) error {
	return json.Unmarshal(e.args, v)
}

// Main is a test binary's TestMain for packages with child processes: in a
// child it plays the role the test process asked for and exits; otherwise it
// runs the tests.
func Main(m *testing.M, roles map[string]Role) {
	name, ok := os.LookupEnv(envRole)
	if !ok {
		os.Exit(m.Run())
	}
	if err := runChild(roles[name]); err != nil {
		fmt.Fprintf(os.Stderr, "fault: child role %q: %v\n", name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runChild(role Role) error {
	if role == nil {
		return fmt.Errorf("no such role")
	}
	child, err := strconv.Atoi(os.Getenv(envChild))
	if err != nil {
		return fmt.Errorf("%s: %w", envChild, err)
	}
	link, err := dialLink(os.Getenv(envCoord), child)
	if err != nil {
		return fmt.Errorf("dial the test process: %w", err)
	}
	defer link.Close()
	// The test process asks a child to stop by closing its stdin, which
	// also happens when the test process dies.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	return role(ctx, &Env{Child: child, Link: link, args: []byte(os.Getenv(envArgs))})
}

// Child is a child process playing a role, started by [Spawn]. Its methods
// are safe for concurrent use. The test's cleanup kills it if it still runs.
type Child struct {
	n     int
	role  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *tailBuffer
	done  chan struct{} // closed once the process has been reaped
	err   error         // what Wait returned; read only after done is closed

	mu sync.Mutex // serializes Pause and Resume
}

// Spawn starts the test binary again as child number n (from 1) playing
// role, with args (encoded as JSON) and a link to coord. The child dies with
// the test process (on Linux).
func Spawn(tb testing.TB, coord *Coordinator, n int, role string, args any) *Child {
	tb.Helper()
	a, err := json.Marshal(args)
	if err != nil {
		tb.Fatalf("fault: role %s: %v", role, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		envRole+"="+role,
		envCoord+"="+coord.Addr(),
		envChild+"="+strconv.Itoa(n),
		envArgs+"="+string(a),
	)
	c := &Child{n: n, role: role, cmd: cmd, out: &tailBuffer{limit: outputLimit}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	cmd.SysProcAttr = redistest.ChildProcAttr()
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		tb.Fatalf("fault: %v", err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("fault: start child %d (%s): %v", n, role, err)
	}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	tb.Cleanup(c.kill)
	return c
}

// Pid returns the child's process id.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Pause stops the child with SIGSTOP and returns once it is stopped: all its
// threads, timers included, stand still until Resume.
func (c *Child) Pause(tb testing.TB) {
	tb.Helper()
	c.setStopped(tb, true)
}

// Resume continues a paused child with SIGCONT and returns once it runs.
func (c *Child) Resume(tb testing.TB) {
	tb.Helper()
	c.setStopped(tb, false)
}

func (c *Child) setStopped(tb testing.TB, stop bool) {
	tb.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := redistest.SetStopped(c.cmd.Process, stop, signalTimeout); err != nil {
		tb.Fatalf("fault: child %d: %v\n%s", c.n, err, c.out)
	}
}

// Kill ends the child with SIGKILL and returns once it is gone.
func (c *Child) Kill(tb testing.TB) {
	tb.Helper()
	c.kill()
}

// kill ends the child, paused or not (SIGKILL ends a stopped process too),
// and waits until it is reaped.
func (c *Child) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
	c.stdin.Close()
}

// Stop asks the child to finish (its role's context ends), waits for it, and
// fails the test, quoting the child's output, if it did not exit with status
// 0 or took over a minute.
func (c *Child) Stop(tb testing.TB) {
	tb.Helper()
	c.stdin.Close()
	select {
	case <-c.done:
	case <-time.After(stopTimeout):
		c.kill()
		tb.Fatalf("fault: child %d (%s) did not stop within %v\n%s", c.n, c.role, stopTimeout, c.out)
	}
	if c.err != nil {
		tb.Errorf("fault: child %d (%s): %v\n%s", c.n, c.role, c.err, c.out)
	}
}

// Wait waits until the child exits by itself and fails the test like Stop.
func (c *Child) Wait(tb testing.TB, timeout time.Duration) {
	tb.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		c.kill()
		tb.Fatalf("fault: child %d (%s) did not finish within %v\n%s", c.n, c.role, timeout, c.out)
	}
	if c.err != nil {
		tb.Errorf("fault: child %d (%s): %v\n%s", c.n, c.role, c.err, c.out)
	}
}

// Output returns the end of what the child wrote to stdout and stderr.
func (c *Child) Output() string { return c.out.String() }

// tailBuffer keeps the last limit bytes written to it.
type tailBuffer struct {
	mu    sync.Mutex
	limit int
	b     []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.limit; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.Clone(t.b))
}
