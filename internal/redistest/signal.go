package redistest

import (
	"fmt"
	"os"
	"time"
)

// SetStopped stops the process p with SIGSTOP (stop true) or continues it with SIGCONT (stop
// false), and returns once the signal has taken effect, so that whatever the caller does next
// happens while the process stands still (or runs again). It returns an error if the signal
// can't be sent (outside Unix there are no job-control signals) or the process did not react
// within timeout. Where the process state can't be read (outside Linux) it returns as soon as
// the signal is sent.
func SetStopped(p *os.Process, stop bool, timeout time.Duration) error {
	sig := sigCont
	if stop {
		sig = sigStop
	}
	if err := p.Signal(sig); err != nil {
		return fmt.Errorf("redistest: signal %v to process %d: %w", sig, p.Pid, err)
	}
	deadline := time.Now().Add(timeout)
	for {
		stopped, err := ProcessStopped(p.Pid)
		if err != nil || stopped == stop {
			return nil // done, or the state can't be observed on this platform
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: process %d did not react to %v within %v", p.Pid, sig, timeout)
		}
		time.Sleep(100 * time.Microsecond)
	}
}
