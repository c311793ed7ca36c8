package trace

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/gpumem/gpumem"
)

// FuzzRead checks that Read never panics, that failures match
// ErrInvalidValue, and that a trace that reads writes back to the same events.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		"a 1 100 0\nf 1 0\n", "a 1 10 0\r\nf 1 1", "# c\n\na 5 7 3\n", "f 1 0\n",
		"a 1 10 -1\n", "a 1 10 0 x\n", "a 18446744073709551615 1 2147483647\n",
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := Read(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, gpumem.ErrInvalidValue) {
				t.Fatalf("Read: %v does not match ErrInvalidValue", err)
			}
			return
		}
		if err := tr.Validate(); err != nil {
			t.Fatalf("Read accepted a trace Validate rejects: %v", err)
		}
		var buf bytes.Buffer
		if err := Write(&buf, tr); err != nil {
			t.Fatal(err)
		}
		again, err := Read(&buf)
		if err != nil {
			t.Fatalf("written trace does not read back: %v", err)
		}
		if len(tr.Events) != len(again.Events) || (len(tr.Events) > 0 && !reflect.DeepEqual(tr.Events, again.Events)) {
			t.Fatal("round trip changed the events")
		}
		st := tr.Stats()
		if st.Pairs+st.Frees != len(tr.Events) || st.LiveAtEnd != st.Pairs-st.Frees {
			t.Fatalf("inconsistent stats %+v for %d events", st, len(tr.Events))
		}
	})
}
