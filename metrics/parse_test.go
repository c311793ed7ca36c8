package metrics_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// exposition is a parsed Prometheus text exposition.
type exposition struct {
	types   map[string]string  // family -> type
	samples map[string]float64 // canonical series (name{k="v",...} with labels in written order, unescaped) -> value
	order   []string           // families in order of appearance
}

// expect checks that the exposition has series, of value want.
func (e *exposition) expect(t *testing.T, series string, want float64) {
	t.Helper()
	got, ok := e.samples[series]
	if !ok {
		t.Errorf("missing %s", series)
	} else if got != want {
		t.Errorf("%s = %v, want %v", series, got, want)
	}
}

var (
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// parseExposition checks every line of text against the text format
// (version 0.0.4) and returns what it holds, or the first violation.
func parseExposition(text string) (*exposition, error) {
	e := &exposition{types: map[string]string{}, samples: map[string]float64{}}
	if text == "" {
		return e, nil
	}
	if !strings.HasSuffix(text, "\n") {
		return nil, fmt.Errorf("output does not end with a newline")
	}
	helps := map[string]bool{}
	done := map[string]bool{} // families whose block has ended
	current := ""
	enter := func(fam string) error {
		if fam == current {
			return nil
		}
		if done[fam] {
			return fmt.Errorf("family %s interleaved with another", fam)
		}
		if current != "" {
			done[current] = true
		}
		current = fam
		e.order = append(e.order, fam)
		return nil
	}
	for n, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		fail := func(format string, a ...any) error {
			return fmt.Errorf("line %d %q: %s", n+1, line, fmt.Sprintf(format, a...))
		}
		if strings.HasPrefix(line, "#") {
			f := strings.SplitN(line, " ", 4)
			if len(f) < 3 || f[0] != "#" || (f[1] != "HELP" && f[1] != "TYPE") {
				if len(f) >= 2 && (f[1] == "HELP" || f[1] == "TYPE") {
					return nil, fail("malformed %s line", f[1])
				}
				continue // a comment
			}
			name := f[2]
			if !metricName.MatchString(name) {
				return nil, fail("bad metric name")
			}
			if err := enter(name); err != nil {
				return nil, fail("%v", err)
			}
			switch f[1] {
			case "HELP":
				if helps[name] {
					return nil, fail("second HELP")
				}
				helps[name] = true
				if len(f) == 4 {
					if err := checkEscapes(f[3], false); err != nil {
						return nil, fail("%v", err)
					}
				}
			case "TYPE":
				if len(f) != 4 {
					return nil, fail("TYPE without a type")
				}
				if _, ok := e.types[name]; ok {
					return nil, fail("second TYPE")
				}
				switch f[3] {
				case "counter", "gauge", "histogram", "summary", "untyped":
				default:
					return nil, fail("unknown type %q", f[3])
				}
				for s := range e.samples {
					if strings.HasPrefix(s, name+"{") || s == name {
						return nil, fail("TYPE after samples")
					}
				}
				e.types[name] = f[3]
			}
			continue
		}
		if strings.TrimSpace(line) == "" {
			return nil, fail("empty line")
		}
		series, value, err := parseSample(line)
		if err != nil {
			return nil, fail("%v", err)
		}
		name := series
		if i := strings.IndexByte(series, '{'); i >= 0 {
			name = series[:i]
		}
		if t := e.types[name]; t == "" {
			return nil, fail("sample of a family without TYPE")
		}
		if err := enter(name); err != nil {
			return nil, fail("%v", err)
		}
		if _, dup := e.samples[series]; dup {
			return nil, fail("duplicate series")
		}
		e.samples[series] = value
	}
	return e, nil
}

// parseSample parses `name{l="v",...} value [timestamp]` and returns the
// series with unescaped label values.
func parseSample(line string) (string, float64, error) {
	i := strings.IndexAny(line, "{ ")
	if i <= 0 {
		return "", 0, fmt.Errorf("no value")
	}
	name := line[:i]
	if !metricName.MatchString(name) {
		return "", 0, fmt.Errorf("bad metric name %q", name)
	}
	var sb strings.Builder
	sb.WriteString(name)
	rest := line[i:]
	if rest[0] == '{' {
		rest = rest[1:]
		sb.WriteByte('{')
		seen := map[string]bool{}
		first := true
		for {
			if strings.HasPrefix(rest, "}") {
				rest = rest[1:]
				break
			}
			eq := strings.IndexByte(rest, '=')
			if eq < 0 {
				return "", 0, fmt.Errorf("label without =")
			}
			ln := rest[:eq]
			if !labelName.MatchString(ln) || strings.HasPrefix(ln, "__") {
				return "", 0, fmt.Errorf("bad label name %q", ln)
			}
			if seen[ln] {
				return "", 0, fmt.Errorf("label %q twice", ln)
			}
			seen[ln] = true
			rest = rest[eq+1:]
			if !strings.HasPrefix(rest, `"`) {
				return "", 0, fmt.Errorf("label value not quoted")
			}
			rest = rest[1:]
			var v strings.Builder
			closed := false
			for j := 0; j < len(rest); j++ {
				c := rest[j]
				if c == '\\' {
					if j+1 >= len(rest) {
						return "", 0, fmt.Errorf("dangling backslash")
					}
					switch rest[j+1] {
					case '\\':
						v.WriteByte('\\')
					case '"':
						v.WriteByte('"')
					case 'n':
						v.WriteByte('\n')
					default:
						return "", 0, fmt.Errorf("bad escape \\%c", rest[j+1])
					}
					j++
					continue
				}
				if c == '"' {
					rest = rest[j+1:]
					closed = true
					break
				}
				if c == '\n' {
					return "", 0, fmt.Errorf("raw newline in label value")
				}
				v.WriteByte(c)
			}
			if !closed {
				return "", 0, fmt.Errorf("unterminated label value")
			}
			if !first {
				sb.WriteByte(',')
			}
			first = false
			fmt.Fprintf(&sb, "%s=%q", ln, v.String())
			rest = strings.TrimPrefix(rest, ",")
		}
		sb.WriteByte('}')
	}
	if !strings.HasPrefix(rest, " ") {
		return "", 0, fmt.Errorf("no space before the value")
	}
	f := strings.Split(rest[1:], " ")
	if len(f) < 1 || len(f) > 2 || f[0] == "" {
		return "", 0, fmt.Errorf("bad value/timestamp %q", rest)
	}
	v, err := parseValue(f[0])
	if err != nil {
		return "", 0, err
	}
	if len(f) == 2 {
		if _, err := strconv.ParseInt(f[1], 10, 64); err != nil {
			return "", 0, fmt.Errorf("bad timestamp: %w", err)
		}
	}
	return sb.String(), v, nil
}

func parseValue(s string) (float64, error) {
	switch s {
	case "NaN", "+Inf", "-Inf":
	default:
		if strings.ContainsAny(s, "IiNn") { // Go would accept "inf", "Infinity", "nan"
			return 0, fmt.Errorf("bad value %q", s)
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, fmt.Errorf("bad value %q: %w", s, err)
	}
	return v, nil
}

func checkEscapes(s string, quote bool) error {
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			if i+1 >= len(s) {
				return fmt.Errorf("dangling backslash")
			}
			switch s[i+1] {
			case '\\', 'n':
			case '"':
				if !quote {
					return fmt.Errorf(`\" in HELP`)
				}
			default:
				return fmt.Errorf("bad escape \\%c", s[i+1])
			}
			i++
		}
	}
	return nil
}

// key builds the canonical series the parser produces.
func key(name string, labels ...string) string {
	if len(labels) == 0 {
		return name
	}
	var sb strings.Builder
	sb.WriteString(name)
	sb.WriteByte('{')
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%s=%q", labels[i], labels[i+1])
	}
	sb.WriteByte('}')
	return sb.String()
}

// The validator rejects what the format forbids, so that its passing means
// something.
func TestValidatorRejects(t *testing.T) {
	good := "# HELP a_b x\\\\y\\n\n# TYPE a_b gauge\na_b{l=\"v\\\"\\n\"} 1\n"
	if _, err := parseExposition(good); err != nil {
		t.Fatalf("valid text rejected: %v", err)
	}
	for _, bad := range []string{
		"# TYPE a gauge\na 1",                                      // no final newline
		"# TYPE 1a gauge\n",                                        // bad metric name
		"# TYPE a gauge\n# TYPE a gauge\n",                         // second TYPE
		"# HELP a x\n# HELP a y\n",                                 // second HELP
		"# TYPE a gaug\n",                                          // unknown type
		"a 1\n",                                                    // no TYPE
		"# TYPE a gauge\na{l=\"v\\t\"} 1\n",                        // bad escape
		"# TYPE a gauge\na{l=\"v} 1\n",                             // unterminated
		"# TYPE a gauge\na{__l=\"v\"} 1\n",                         // reserved label
		"# TYPE a gauge\na{l=\"v\",l=\"w\"} 1\n",                   // label twice
		"# TYPE a gauge\na 1\na 2\n",                               // duplicate series
		"# TYPE a gauge\na inf\n",                                  // bad value
		"# TYPE a gauge\na  1\n",                                   // bad spacing
		"# TYPE a gauge\n# TYPE b gauge\nb 1\na 1\n",               // interleaved
		"# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na{x=\"1\"} 2\n", // interleaved
		"# TYPE a gauge\n\n",                                       // empty line
		"# HELP a bad\\q\n",                                        // bad HELP escape
	} {
		if _, err := parseExposition(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
