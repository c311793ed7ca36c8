package tests

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/asyncpool"
	"github.com/gpumem/gpumem/blas"
	"github.com/gpumem/gpumem/caching"
	"github.com/gpumem/gpumem/collective"
	"github.com/gpumem/gpumem/deferrable"
	"github.com/gpumem/gpumem/kernel"
	"github.com/gpumem/gpumem/managed"
	"github.com/gpumem/gpumem/metrics"
	"github.com/gpumem/gpumem/rtc"
	"github.com/gpumem/gpumem/sim"
	"github.com/gpumem/gpumem/telemetry"
)

// nilReceivers are the public types whose every exported method must be
// safe on a nil pointer: nothing panics across the public API. named marks
// the types whose errors name the method ("caching: Allocate on a nil
// allocator"); the others have one error for every method.
var nilReceivers = map[string]struct {
	recv  any
	named bool
}{
	"caching.Allocator":   {(*caching.Allocator)(nil), true},
	"asyncpool.Allocator": {(*asyncpool.Allocator)(nil), true},
	"managed.Allocator":   {(*managed.Allocator)(nil), true},
	"managed.Buffer":      {(*managed.Buffer)(nil), false},
	"deferrable.Manager":  {(*deferrable.Manager)(nil), true},
	"deferrable.Buffer":   {(*deferrable.Buffer)(nil), false},
	"kernel.Launcher":     {(*kernel.Launcher)(nil), true},
	"rtc.Compiler":        {(*rtc.Compiler)(nil), true},
	"sim.GPU":             {(*sim.GPU)(nil), true},
	"blas.Handle":         {(*blas.Handle)(nil), false},
	"collective.Comm":     {(*collective.Comm)(nil), false},
	"telemetry.Telemetry": {(*telemetry.Telemetry)(nil), false},
}

var errorType = reflect.TypeFor[error]()

// Every exported method of each type in nilReceivers, called on a nil
// receiver, does not panic, and every error it returns is non-nil and
// matches ErrInvalidValue. Each method is called twice: with zero-valued
// arguments (a nil slice for a variadic parameter), and with plausible ones
// (see plausible), so that a method checking its arguments before its
// receiver is caught too. Results other than errors are not checked: a
// method with no error result gives its zero values.
func TestNilReceiver(t *testing.T) {
	for name, r := range nilReceivers {
		v := reflect.ValueOf(r.recv)
		typ := v.Type()
		if typ.NumMethod() == 0 {
			t.Errorf("%s: no exported methods", name)
		}
		pkg, _, _ := strings.Cut(name, ".")
		for i := range typ.NumMethod() {
			m := typ.Method(i)
			want := "" // what the error says, where it names the method
			if r.named {
				want = pkg + ": " + m.Name + " on a nil "
			}
			t.Run(name+"."+m.Name, func(t *testing.T) {
				t.Run("zero", func(t *testing.T) { callNil(t, v.Method(i), reflect.Zero, want) })
				t.Run("plausible", func(t *testing.T) {
					callNil(t, v.Method(i), func(t reflect.Type) reflect.Value { return plausible(t, 0) }, want)
				})
			})
		}
	}
}

// What the methods of a nil *deferrable.Manager return is safe to use too:
// its collector reports zeros, and its OOM handler is none (nil, which
// SetOOMHandler takes as no handler).
func TestNilManagerHelpers(t *testing.T) {
	var m *deferrable.Manager
	n := 0
	m.Collector().Collect(func(int, []metrics.Label, float64) { n++ })
	if n == 0 {
		t.Error("the collector of a nil manager emitted nothing")
	}
	_ = m.Collector().ExpvarValue()
	if h := m.OOMHandler(); h != nil {
		t.Error("OOMHandler of a nil manager is not nil")
	}
	// No device: not 0, which is one.
	if d := m.Device(); d != -1 {
		t.Errorf("Device of a nil manager: %d, want -1", d)
	}
}

// plausible returns a value of type t that argument checks are likely to
// accept: context.Background() for a context, 1 for a number, "x" for a
// string, true, a one-element slice, an empty map, a pointer to a
// plausible value, a function returning zero values, and a struct with
// plausible exported fields. Other interfaces and channels are nil.
func plausible(t reflect.Type, depth int) reflect.Value {
	if depth > 4 {
		return reflect.Zero(t)
	}
	if t == reflect.TypeFor[context.Context]() {
		return reflect.ValueOf(context.Background())
	}
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.String:
		v.SetString("x")
	case reflect.Slice:
		v.Set(reflect.MakeSlice(t, 1, 1))
		v.Index(0).Set(plausible(t.Elem(), depth+1))
	case reflect.Array:
		for i := range v.Len() {
			v.Index(i).Set(plausible(t.Elem(), depth+1))
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(t))
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		p.Elem().Set(plausible(t.Elem(), depth+1))
		v.Set(p)
	case reflect.Func:
		v.Set(reflect.MakeFunc(t, func([]reflect.Value) []reflect.Value {
			out := make([]reflect.Value, t.NumOut())
			for i := range out {
				out[i] = reflect.Zero(t.Out(i))
			}
			return out
		}))
	case reflect.Struct:
		for i := range t.NumField() {
			if f := v.Field(i); f.CanSet() {
				f.Set(plausible(t.Field(i).Type, depth+1))
			}
		}
	}
	return v
}

// callNil calls fn with the arguments arg gives for its parameter types
// and checks its error results; where want is not empty, each error's
// message must contain it.
func callNil(t *testing.T, fn reflect.Value, arg func(reflect.Type) reflect.Value, want string) {
	t.Helper()
	ft := fn.Type()
	args := make([]reflect.Value, ft.NumIn())
	for i := range args {
		args[i] = arg(ft.In(i))
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panicked on a nil receiver: %v", r)
		}
	}()
	var out []reflect.Value
	if ft.IsVariadic() {
		out = fn.CallSlice(args)
	} else {
		out = fn.Call(args)
	}
	for i, o := range out {
		if ft.Out(i) != errorType {
			continue
		}
		err, _ := o.Interface().(error)
		if err == nil {
			t.Errorf("result %d: nil error on a nil receiver", i)
		} else if !errors.Is(err, gpumem.ErrInvalidValue) {
			t.Errorf("result %d: %v, want ErrInvalidValue", i, err)
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("result %d: %q does not say %q", i, err, want)
		}
	}
}
