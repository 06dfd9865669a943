package crontest

import (
	"errors"
	"io"
	"testing"
	"time"
)

// TestMemPipe checks the in-memory connection: bytes written on one end
// are read on the other, in order, and a close ends both directions.
func TestMemPipe(t *testing.T) {
	a, b := memPipe()
	for _, s := range []string{"*1\r\n", "$4\r\nPING\r\n"} {
		if _, err := a.Write([]byte(s)); err != nil {
			t.Fatalf("write %q: %v", s, err)
		}
	}
	got := make([]byte, 0, 16)
	buf := make([]byte, 5)
	for len(got) < len("*1\r\n$4\r\nPING\r\n") {
		n, err := b.Read(buf)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		got = append(got, buf[:n]...)
	}
	if string(got) != "*1\r\n$4\r\nPING\r\n" {
		t.Errorf("read %q, want what was written", got)
	}
	if _, err := b.Write([]byte("+PONG\r\n")); err != nil {
		t.Fatalf("write back: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	reply, err := io.ReadAll(a)
	if err != nil || string(reply) != "+PONG\r\n" {
		t.Errorf("after the other end closed, read %q, %v; want the reply, then EOF", reply, err)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("a write after the other end closed: %v, want %v", err, io.ErrClosedPipe)
	}
	if err := a.SetReadDeadline(time.Time{}); err == nil {
		t.Error("a deadline on a closed connection: no error")
	}
}
