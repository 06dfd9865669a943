package service_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/wakuwaku-go/wakuwaku/service"
)

type config struct{ name string }

func TestLookup(t *testing.T) {
	var sb strings.Builder
	s, err := service.New(&config{"a"}, 42, &sb)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := service.Lookup[*config](s); err != nil || c.name != "a" {
		t.Errorf("Lookup[*config] = %v, %v", c, err)
	}
	if n, ok := service.Get[int](s); !ok || n != 42 {
		t.Errorf("Get[int] = %v, %v", n, ok)
	}
	if w, err := service.Lookup[io.Writer](s); err != nil || w != &sb {
		t.Errorf("Lookup[io.Writer] = %v, %v, want the one implementation", w, err)
	}
	if _, err := service.Lookup[config](s); !errors.Is(err, service.ErrMissing) || !strings.Contains(err.Error(), "service_test.config") {
		t.Errorf("Lookup[config] = %v, want ErrMissing naming the type", err)
	}
	if _, err := service.Lookup[error](s); !errors.Is(err, service.ErrMissing) {
		t.Errorf("Lookup[error] = %v, want ErrMissing", err)
	}
	if _, err := service.Lookup[int]((*service.Services)(nil)); !errors.Is(err, service.ErrMissing) {
		t.Errorf("Lookup on nil = %v, want ErrMissing", err)
	}
}

// TestNewRefusesNil checks that New refuses a nil value of every kind, a
// typed nil in an interface included, with an error that names its type:
// a constructor handed one would only fail when it first used it.
func TestNewRefusesNil(t *testing.T) {
	type handler func()
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"nil", nil, "value 1 is nil"},
		{"nil pointer", (*config)(nil), "value 1 is a nil *service_test.config"},
		{"nil func", handler(nil), "value 1 is a nil service_test.handler"},
		{"nil map", map[string]int(nil), "value 1 is a nil map[string]int"},
		{"nil Writer", io.Writer((*bytes.Buffer)(nil)), "value 1 is a nil *bytes.Buffer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := service.New(42, tc.v)
			if err == nil {
				t.Fatalf("New(42, %T(nil)) = %v, nil error; want an error", tc.v, s)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New(42, %T(nil)) = %q, want it to say %q", tc.v, err, tc.want)
			}
		})
	}
}

func TestAmbiguous(t *testing.T) {
	if _, err := service.New(1, 2); !errors.Is(err, service.ErrAmbiguous) {
		t.Errorf("New(1, 2) = %v, want ErrAmbiguous", err)
	}
	if _, err := service.New(1, nil); err == nil {
		t.Error("New(1, nil) = nil error, want an error")
	}
	// Both implement io.Reader; only the Builder implements io.StringWriter.
	s, _ := service.New(&strings.Builder{}, &strings.Reader{}, &config{})
	if _, err := service.Lookup[io.StringWriter](s); err != nil {
		t.Errorf("Lookup[io.StringWriter] = %v, want the Builder", err)
	}
	s, _ = service.New(&bytes.Buffer{}, &strings.Reader{})
	if _, err := service.Lookup[io.Reader](s); !errors.Is(err, service.ErrAmbiguous) {
		t.Errorf("Lookup[io.Reader] = %v, want ErrAmbiguous", err)
	}
	c := service.Collect(&config{"a"}, &config{"b"}, 7, nil)
	if _, err := service.Lookup[*config](c); !errors.Is(err, service.ErrAmbiguous) {
		t.Errorf("Collect: Lookup[*config] = %v, want ErrAmbiguous", err)
	}
	if n, err := service.Lookup[int](c); n != 7 || err != nil {
		t.Errorf("Collect: Lookup[int] = %v, %v", n, err)
	}
	if c.Len() != 2 {
		t.Errorf("Collect: Len = %d, want 2", c.Len())
	}
}
