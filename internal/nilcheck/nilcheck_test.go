package nilcheck

import "testing"

type thing struct{}

type namer interface{ name() }

func (*thing) name() {}

func TestIs(t *testing.T) {
	var nilThing *thing
	var n namer
	for _, c := range []struct {
		v    any
		want bool
	}{
		{nil, true},
		{nilThing, true},
		{namer(nilThing), true},
		{n, true},
		{&thing{}, false},
		{thing{}, false},
		{3, false},
	} {
		if got := Is(c.v); got != c.want {
			t.Errorf("Is(%#v) = %v, want %v", c.v, got, c.want)
		}
	}
}
