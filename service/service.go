// Package service is a registry of a service's dependencies and components,
// each held by its Go type: the Redis client, the config, the jobs built
// from them. A constructor asks for what it needs by type, and the registry
// finds the one value of that type.
package service

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/wakuwaku-go/wakuwaku/internal/servicehook"
	"github.com/wakuwaku-go/wakuwaku/internal/typednil"
)

// ErrMissing is returned, wrapped, when no value of the wanted type is
// registered.
var ErrMissing = errors.New("service: no value of this type")

// ErrAmbiguous is returned, wrapped, when more than one registered value
// could be the wanted one: two of one type, or, for an interface, two that
// implement it.
var ErrAmbiguous = errors.New("service: more than one value of this type")

// Services holds values by their dynamic Go type, at most one per type. It
// is built once, by [New] or by the root package's ServiceBuilder, and is
// read-only afterwards, so its methods are safe for concurrent use. A nil
// *Services holds nothing.
type Services struct {
	byType map[reflect.Type]any
	order  []reflect.Type // in registration order, for errors and Types
}

// New returns the registry of values. It returns an error wrapping
// [ErrAmbiguous] if two values have one type, and one naming the index and
// the type if a value is nil: nil itself, or a nil pointer, map, slice, func
// or channel, such as a (*redis.Client)(nil), which a constructor given it
// would only find out about when it first used it.
func New(values ...any) (*Services, error) {
	s := &Services{byType: make(map[reflect.Type]any, len(values))}
	for i, v := range values {
		switch {
		case v == nil:
			return nil, fmt.Errorf("service: value %d is nil", i)
		case typednil.Is(v):
			return nil, fmt.Errorf("service: value %d is a nil %T", i, v)
		}
		t := reflect.TypeOf(v)
		if _, dup := s.byType[t]; dup {
			return nil, fmt.Errorf("%w: value %d: two values of type %v", ErrAmbiguous, i, t)
		}
		s.byType[t] = v
		s.order = append(s.order, t)
	}
	return s, nil
}

func init() {
	servicehook.Collect = func(values ...any) any { return collect(values...) }
}

// collect returns the registry of values like [New], but never fails: a nil
// value is left out, and a type that two values share is held as ambiguous,
// so that looking it up returns [ErrAmbiguous]. ServiceBuilder.Start uses it,
// through package servicehook, for the jobs it built, since two jobs of one
// type are fine as long as their names differ.
func collect(values ...any) *Services {
	s := &Services{byType: make(map[reflect.Type]any, len(values))}
	for _, v := range values {
		if v == nil {
			continue
		}
		t := reflect.TypeOf(v)
		if _, dup := s.byType[t]; dup {
			s.byType[t] = ambiguous{}
			continue
		}
		s.byType[t] = v
		s.order = append(s.order, t)
	}
	return s
}

// ambiguous stands for the values of a type that collect found twice.
type ambiguous struct{}

// Len returns how many values s holds.
func (s *Services) Len() int {
	if s == nil {
		return 0
	}
	return len(s.order)
}

func (s *Services) types() []reflect.Type {
	if s == nil {
		return nil
	}
	return s.order
}

// Lookup returns the value of type T: the value registered with exactly
// that type or, when T is an interface and no value has exactly that type,
// the one value that implements it. It returns an error wrapping
// [ErrMissing] if there is none, and [ErrAmbiguous] if an interface is
// implemented by more than one; both name T.
func Lookup[T any](s *Services) (T, error) {
	var zero T
	t := reflect.TypeFor[T]()
	if s != nil {
		switch v := s.byType[t].(type) {
		case nil:
		case ambiguous:
			return zero, fmt.Errorf("%w: %v", ErrAmbiguous, t)
		default:
			return v.(T), nil
		}
	}
	if t.Kind() != reflect.Interface {
		return zero, fmt.Errorf("%w: %v", ErrMissing, t)
	}
	var found []reflect.Type
	for _, vt := range s.types() {
		if vt.Implements(t) {
			if _, amb := s.byType[vt].(ambiguous); amb {
				return zero, fmt.Errorf("%w: %v is implemented by more than one %v", ErrAmbiguous, t, vt)
			}
			found = append(found, vt)
		}
	}
	switch len(found) {
	case 0:
		return zero, fmt.Errorf("%w: %v", ErrMissing, t)
	case 1:
		return s.byType[found[0]].(T), nil // found has no ambiguous type
	}
	return zero, fmt.Errorf("%w: %v is implemented by %v", ErrAmbiguous, t, found)
}

// Get is like [Lookup] without the reason: it reports whether the value was
// found.
func Get[T any](s *Services) (T, bool) {
	v, err := Lookup[T](s)
	return v, err == nil
}
