package typednil_test

import (
	"testing"
	"unsafe"

	"github.com/wakuwaku-go/wakuwaku/internal/typednil"
)

type (
	fn    func()
	table map[string]int
	list  []int
	pipe  chan int
)

func TestIs(t *testing.T) {
	var x int
	tests := []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"nil pointer", (*int)(nil), true},
		{"nil func", fn(nil), true},
		{"nil map", table(nil), true},
		{"nil slice", list(nil), true},
		{"nil chan", pipe(nil), true},
		{"nil unsafe.Pointer", unsafe.Pointer(nil), true},
		{"pointer", &x, false},
		{"func", fn(func() {}), false},
		{"empty map", table{}, false},
		{"empty slice", list{}, false},
		{"chan", make(pipe), false},
		{"int", 0, false},
		{"empty string", "", false},
		{"struct", struct{}{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := typednil.Is(tc.v); got != tc.want {
				t.Errorf("Is(%T(%v)) = %v, want %v", tc.v, tc.v, got, tc.want)
			}
		})
	}
}
