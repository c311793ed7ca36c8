package gpumem

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode"
)

// AllocConfEnv is the environment variable that configures allocators, in
// PyTorch's PYTORCH_CUDA_ALLOC_CONF syntax (see SplitAllocConf). Package
// config gives its keys their meaning.
const AllocConfEnv = "GPUMEM_ALLOC_CONF"

// ConfEntry is one key:value entry of an allocator configuration, spaces
// trimmed; a bracketed list stays one value ("[256:1,>:8]").
type ConfEntry struct {
	Key, Value string
}

// ConfError is a configuration error: the key, the value and what is wrong.
// It matches ErrInvalidValue.
type ConfError struct {
	Key    string // the key concerned ("" when the entry has none)
	Value  string // the value as given
	Reason string
	// Source names where the configuration came from, as the message says
	// it: AllocConfEnv when it was read from the environment (FromEnv,
	// NewAllocatorFromEnv), a command-line flag, a file. Empty for a string
	// passed to a function, which the message calls "allocator
	// configuration".
	Source string
}

// Error formats the error, naming the source, the key and the value.
func (e *ConfError) Error() string {
	src := e.Source
	if src == "" {
		src = "allocator configuration"
	}
	if e.Key == "" {
		return fmt.Sprintf("gpumem: %s: %q: %s", src, e.Value, e.Reason)
	}
	v := e.Value
	if strings.ContainsFunc(v, func(r rune) bool { return !unicode.IsPrint(r) }) {
		v = strconv.Quote(v) // a character that would not show: quoted, so that it does
	}
	return fmt.Sprintf("gpumem: %s: %s:%s: %s", src, e.Key, v, e.Reason)
}

// ConfFrom returns err with the configuration's source set to source when
// err is, or wraps, a *ConfError (a copy: the original is not changed), and
// err unchanged otherwise. A program that reads a configuration from its own
// flag or file uses it so that the message names where to look.
func ConfFrom(err error, source string) error {
	var ce *ConfError
	if !errors.As(err, &ce) || ce.Source == source {
		return err
	}
	c := *ce
	c.Source = source
	if err == error(ce) {
		return &c
	}
	return &relabelled{err: err, conf: &c}
}

// relabelled is an error chain whose *ConfError was given a source: its
// message is the chain's with the old label replaced, and As finds the
// relabelled *ConfError first.
type relabelled struct {
	err  error
	conf *ConfError
}

func (r *relabelled) Error() string {
	var old *ConfError
	errors.As(r.err, &old)
	return strings.Replace(r.err.Error(), old.Error(), r.conf.Error(), 1)
}

func (r *relabelled) Unwrap() []error { return []error{r.conf, r.err} }

// Unwrap returns ErrInvalidValue.
func (e *ConfError) Unwrap() error { return ErrInvalidValue }

// SplitAllocConf splits a configuration string into its entries:
//
//	key:value,key:value,key:[a:b,c:d]
//
// Whitespace around keys, values and separators is ignored; the empty string
// has no entries. A key given twice, an entry without ':' or key, an empty
// entry and unbalanced or nested brackets are *ConfError. The values are not
// interpreted here: package config knows the keys.
func SplitAllocConf(s string) ([]ConfEntry, error) {
	parts, err := splitTopLevel(s)
	if err != nil {
		return nil, err
	}
	out := make([]ConfEntry, 0, len(parts))
	seen := map[string]bool{}
	for _, ent := range parts {
		key, val, ok := strings.Cut(ent, ":")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if !ok {
			return nil, &ConfError{Key: key, Reason: "missing ':' and value"}
		}
		if key == "" {
			return nil, &ConfError{Value: ent, Reason: "missing key before ':'"}
		}
		if seen[key] {
			return nil, &ConfError{Key: key, Value: val, Reason: "key given more than once"}
		}
		seen[key] = true
		out = append(out, ConfEntry{Key: key, Value: val})
	}
	return out, nil
}

// splitTopLevel splits at top-level commas, keeping bracketed lists whole.
func splitTopLevel(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '[':
			depth++
			if depth > 1 {
				return nil, &ConfError{Value: s, Reason: "nested '[' is not allowed"}
			}
		case ']':
			depth--
			if depth < 0 {
				return nil, &ConfError{Value: s, Reason: "']' without '['"}
			}
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, &ConfError{Value: s, Reason: "'[' without ']'"}
	}
	out = append(out, s[start:])
	for _, e := range out {
		if strings.TrimSpace(e) == "" {
			return nil, &ConfError{Value: s, Reason: "empty entry between commas"}
		}
	}
	return out, nil
}

// confAllocator returns the value of conf's backend key ("" when absent).
func confAllocator(conf string) (string, error) {
	entries, err := SplitAllocConf(conf)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if e.Key == "backend" {
			return e.Value, nil
		}
	}
	return "", nil
}

// allocConfFromEnv reads AllocConfEnv.
func allocConfFromEnv() string { return os.Getenv(AllocConfEnv) }
