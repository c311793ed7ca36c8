// Package nilcheck tells a nil interface value, or one that holds a nil
// pointer, from a usable one: what the public constructors refuse with
// ErrInvalidValue instead of panicking at the first call.
package nilcheck

import "reflect"

// Is reports whether v is nil or holds a nil pointer.
func Is(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}
