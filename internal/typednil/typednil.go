// Package typednil tells a nil value apart when it hides in an interface: a
// (*redis.Client)(nil) passed as a lock.Client, a nil func type returned as a
// cron.Job. Such a value is not == nil, yet has nothing behind it, and the
// packages that take interfaces refuse it where they accept it, not where it
// would first panic.
package typednil

import "reflect"

// Is reports whether v is nil or holds a nil value of a kind that can be nil:
// a pointer, map, slice, func, channel or interface.
func Is(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}
