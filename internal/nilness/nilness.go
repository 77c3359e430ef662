// Package nilness tells a nil interface from one holding a nil pointer.
package nilness

import "reflect"

// Is reports whether v is nil or holds a nil pointer, map, slice, func,
// channel or interface: a typed nil, such as a *tokenbucket.Bucket left nil
// by an ignored error, which compares unequal to nil as an interface but
// panics on its first method call.
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
