package lock

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// Name is the set of types a lock built with [New] or [NewRW] can be keyed by.
// Strings and byte slices become their bytes, integers their decimal digits.
// Any other type needs [NewFunc] or [NewRWFunc] and an encoder.
type Name interface {
	~string | ~[]byte | ~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// keyPrefix starts every key this package writes; it is shared with the Rust
// crate and must not change.
const keyPrefix = "@@wakuwaku-entity:"

// checkNamespace returns why ns can't be a namespace, or "" when it can. A
// namespace is non-empty and holds no ':' (it ends where the name starts) and
// no '{' or '}' (an RWLock wraps namespace and name in a hash tag).
func checkNamespace(ns string) string {
	switch {
	case ns == "":
		return "namespace is empty"
	case strings.ContainsAny(ns, ":{}"):
		return fmt.Sprintf("namespace %q contains one of ':', '{', '}'", ns)
	}
	return ""
}

// ttlMillis converts a TTL to the whole milliseconds sent to Redis: at least 1.
func ttlMillis(ttl time.Duration) int64 {
	return max(int64(ttl/time.Millisecond), 1)
}

// family is what a Lock or RWLock value holds: the namespace, the lease and
// how names become keys. It is immutable once built.
type family[N any] struct {
	ns     string
	ttl    time.Duration
	ms     any           // the TTL in whole ms, boxed once for the commands' arguments
	lease  time.Duration // ms as a duration: the lease Redis gives, from which deadlines count
	prefix string        // the key up to the name
	kind   reflect.Kind
	fn     func(N) string // the caller's encoder, when kind is Invalid
}

// newFamily checks ns and ttl, panicking as a constructor of package-level
// values does, and returns the family whose keys start with kindName.
func newFamily[N any](ctor, ns string, ttl time.Duration, kindName, open string) family[N] {
	if why := checkNamespace(ns); why != "" {
		panic("lock." + ctor + ": " + why)
	}
	if ttl <= 0 {
		panic(fmt.Sprintf("lock.%s(%q): ttl is %v, want > 0", ctor, ns, ttl))
	}
	ms := ttlMillis(ttl)
	return family[N]{
		ns:     ns,
		ttl:    ttl,
		ms:     ms,
		lease:  time.Duration(ms) * time.Millisecond,
		prefix: keyPrefix + kindName + ":" + open + ns + ":",
	}
}

// withKind sets the encoder of a family built by New or NewRW: N's kind,
// looked at once so that encoding a name neither reflects nor allocates.
func (f family[N]) withKind() family[N] {
	f.kind = reflect.TypeFor[N]().Kind()
	return f
}

// withFunc sets the encoder of a family built by NewFunc or NewRWFunc.
func (f family[N]) withFunc(ctor string, fn func(N) string) family[N] {
	if fn == nil {
		panic(fmt.Sprintf("lock.%s(%q): name encoder is nil", ctor, f.ns))
	}
	f.fn = fn
	return f
}

// appendKey appends the key of name, up to any suffix, to b. The unsafe
// conversions are sound because kind is N's kind, and Name admits only types
// whose kind fixes their memory layout.
func (f *family[N]) appendKey(b []byte, name *N) []byte {
	b = append(b, f.prefix...)
	p := unsafe.Pointer(name)
	switch f.kind {
	case reflect.String:
		return append(b, *(*string)(p)...)
	case reflect.Slice:
		return append(b, *(*[]byte)(p)...)
	case reflect.Int:
		return strconv.AppendInt(b, int64(*(*int)(p)), 10)
	case reflect.Int8:
		return strconv.AppendInt(b, int64(*(*int8)(p)), 10)
	case reflect.Int16:
		return strconv.AppendInt(b, int64(*(*int16)(p)), 10)
	case reflect.Int32:
		return strconv.AppendInt(b, int64(*(*int32)(p)), 10)
	case reflect.Int64:
		return strconv.AppendInt(b, *(*int64)(p), 10)
	case reflect.Uint:
		return strconv.AppendUint(b, uint64(*(*uint)(p)), 10)
	case reflect.Uint8:
		return strconv.AppendUint(b, uint64(*(*uint8)(p)), 10)
	case reflect.Uint16:
		return strconv.AppendUint(b, uint64(*(*uint16)(p)), 10)
	case reflect.Uint32:
		return strconv.AppendUint(b, uint64(*(*uint32)(p)), 10)
	case reflect.Uint64:
		return strconv.AppendUint(b, *(*uint64)(p), 10)
	}
	return append(b, f.fn(*name)...)
}
