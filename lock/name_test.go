package lock

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/wakuwaku-go/wakuwaku/internal/redistest"
)

type invoiceID uint64
type shop string

func TestKeys(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"uint64", New[uint64]("invoice", time.Second).Key(42), "@@wakuwaku-entity:Lock:invoice:42"},
		{"named uint64", New[invoiceID]("invoice", time.Second).Key(7), "@@wakuwaku-entity:Lock:invoice:7"},
		{"negative int8", New[int8]("n", time.Second).Key(-128), "@@wakuwaku-entity:Lock:n:-128"},
		{"max uint64", New[uint64]("n", time.Second).Key(1<<64 - 1), "@@wakuwaku-entity:Lock:n:18446744073709551615"},
		{"min int64", New[int64]("n", time.Second).Key(-1 << 63), "@@wakuwaku-entity:Lock:n:-9223372036854775808"},
		{"uint8 is a number", New[uint8]("n", time.Second).Key(255), "@@wakuwaku-entity:Lock:n:255"},
		{"string", New[string]("cron", time.Second).Key("hourly-report"), "@@wakuwaku-entity:Lock:cron:hourly-report"},
		{"named string", New[shop]("catalog", time.Second).Key("tokyo"), "@@wakuwaku-entity:Lock:catalog:tokyo"},
		{"empty name", New[string]("cron", time.Second).Key(""), "@@wakuwaku-entity:Lock:cron:"},
		{"binary bytes", New[[]byte]("b", time.Second).Key([]byte{0, 0xff, '{', '}', ':'}), "@@wakuwaku-entity:Lock:b:\x00\xff{}:"},
		{"func", NewFunc("pt", time.Second, func(p [2]int) string { return strings.Repeat("x", p[0]) }).Key([2]int{3, 0}), "@@wakuwaku-entity:Lock:pt:xxx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("Key = %q, want %q", tt.got, tt.want)
			}
		})
	}
}

func TestRWKeys(t *testing.T) {
	w, r := NewRW[string]("catalog", time.Second).Keys("tokyo")
	if want := "@@wakuwaku-entity:RwLock:{catalog:tokyo}:w"; w != want {
		t.Errorf("writer key = %q, want %q", w, want)
	}
	if want := "@@wakuwaku-entity:RwLock:{catalog:tokyo}:r"; r != want {
		t.Errorf("readers key = %q, want %q", r, want)
	}
	w, r = NewRWFunc("p", time.Second, func(n int) string { return "}{" }).Keys(1)
	if w != "@@wakuwaku-entity:RwLock:{p:}{}:w" || r != "@@wakuwaku-entity:RwLock:{p:}{}:r" {
		t.Errorf("Keys with braces = %q, %q", w, r)
	}
}

func TestTTLMillis(t *testing.T) {
	tests := []struct {
		ttl  time.Duration
		want int64
	}{
		{time.Nanosecond, 1},
		{999 * time.Microsecond, 1},
		{time.Millisecond, 1},
		{1500 * time.Microsecond, 1},
		{30 * time.Second, 30000},
	}
	for _, tt := range tests {
		if got := New[string]("n", tt.ttl).f.ms.(int64); got != tt.want {
			t.Errorf("New(%v).ms = %d, want %d", tt.ttl, got, tt.want)
		}
	}
}

func TestConstructorPanics(t *testing.T) {
	tests := []struct {
		name  string
		build func()
		want  string // a fragment the panic message must hold
	}{
		{"empty namespace", func() { New[string]("", time.Second) }, "empty"},
		{"colon", func() { New[string]("a:b", time.Second) }, `"a:b"`},
		{"open brace", func() { NewRW[string]("a{", time.Second) }, `"a{"`},
		{"close brace", func() { NewFunc("}", time.Second, func(int) string { return "" }) }, `"}"`},
		{"zero ttl", func() { New[string]("a", 0) }, "ttl is 0s"},
		{"negative ttl", func() { NewRW[int]("a", -time.Second) }, "ttl is -1s"},
		{"nil encoder", func() { NewRWFunc[int]("a", time.Second, nil) }, "encoder is nil"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tt.want) {
					t.Errorf("panic = %q, want it to mention %q", msg, tt.want)
				}
			}()
			tt.build()
		})
	}
}

// FuzzKeys checks that keys identify their (namespace, name) pair: distinct
// pairs never share a key, and an RWLock's two keys share a hash slot.
func FuzzKeys(f *testing.F) {
	f.Add("invoice", []byte("42"), "invoice", []byte("43"))
	f.Add("a", []byte("b:c"), "a:b", []byte("c"))
	f.Add("ns", []byte("}{x"), "ns", []byte("}{y"))
	f.Add("x", []byte{0xff, 0}, "x", []byte{0xff})
	f.Fuzz(func(t *testing.T, ns1 string, n1 []byte, ns2 string, n2 []byte) {
		if checkNamespace(ns1) != "" || checkNamespace(ns2) != "" {
			return
		}
		l1, l2 := New[[]byte](ns1, time.Second), New[[]byte](ns2, time.Second)
		rw1, rw2 := NewRW[[]byte](ns1, time.Second), NewRW[[]byte](ns2, time.Second)
		same := ns1 == ns2 && bytes.Equal(n1, n2)
		if got := l1.Key(n1) == l2.Key(n2); got != same {
			t.Errorf("Key(%q, %q) == Key(%q, %q) is %v, want %v", ns1, n1, ns2, n2, got, same)
		}
		w1, r1 := rw1.Keys(n1)
		w2, _ := rw2.Keys(n2)
		if got := w1 == w2; got != same {
			t.Errorf("Keys(%q, %q) == Keys(%q, %q) is %v, want %v", ns1, n1, ns2, n2, got, same)
		}
		if w1 == r1 || w1 == l1.Key(n1) {
			t.Errorf("keys of (%q, %q) collide: %q, %q, %q", ns1, n1, w1, r1, l1.Key(n1))
		}
		if sw, sr := redistest.Slot(w1), redistest.Slot(r1); sw != sr {
			t.Errorf("slots of %q and %q = %d, %d, want equal", w1, r1, sw, sr)
		}
	})
}
