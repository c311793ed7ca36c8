package metrics

import (
	"fmt"

	"github.com/gpumem/gpumem"
)

// The exposition format's rules for what a collector names: a family name
// of letters, digits, '_' and ':' not starting with a digit, one of the
// format's types, label names of letters, digits and '_' not starting with
// a digit (names starting "__" are reserved), each once in a sample, and
// never "allocator", which the registry sets itself.

func validMetricName(s string) bool {
	for i, c := range s {
		switch {
		case c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

func validLabelName(s string) bool {
	for i, c := range s {
		switch {
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != "" && !(len(s) >= 2 && s[:2] == "__")
}

var validTypes = map[string]bool{"counter": true, "gauge": true, "histogram": true, "summary": true, "untyped": true}

// checkFamilies reports the first family of fs the exposition format
// cannot carry.
func checkFamilies(fs []Family) error {
	for _, f := range fs {
		if !validMetricName(f.Name) {
			return fmt.Errorf("family name %q is not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*): %w", f.Name, gpumem.ErrInvalidValue)
		}
		if !validTypes[f.Type] {
			return fmt.Errorf("family %s: type %q (want counter, gauge, histogram, summary or untyped): %w", f.Name, f.Type, gpumem.ErrInvalidValue)
		}
	}
	return nil
}

// checkSamples reports the first sample of mfs whose labels the exposition
// format cannot carry: a bad name, or a name twice.
func checkSamples(mfs []MetricFamily) error {
	for _, mf := range mfs {
		for _, s := range mf.Samples {
			for i, l := range s.Labels {
				if !validLabelName(l.Name) {
					return fmt.Errorf("family %s: label name %q is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, not starting __): %w", mf.Name, l.Name, gpumem.ErrInvalidValue)
				}
				for _, m := range s.Labels[:i] {
					if m.Name == l.Name {
						return fmt.Errorf("family %s: label %q twice in one sample (a collector's labels may not name \"allocator\", the registry's): %w", mf.Name, l.Name, gpumem.ErrInvalidValue)
					}
				}
			}
		}
	}
	return nil
}
