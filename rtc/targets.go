package rtc

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/symtab"
)

// target is a parsed target: name is what Result.Target says ("sm_90a",
// "gfx90a:xnack-"), base what the supported set holds ("sm_90", "gfx90a").
type target struct {
	vendor symtab.Vendor
	name   string
	base   string
	num    string // CUDA: "90a"
}

// option is the compiler's target option: PTX is made for the virtual
// architecture compute_XX, a cubin for sm_XX.
func (t target) option(binary bool) string {
	if t.vendor == symtab.CUDA {
		if binary {
			return "--gpu-architecture=sm_" + t.num
		}
		return "--gpu-architecture=compute_" + t.num
	}
	return "--gpu-architecture=" + t.name
}

// parseTarget reads "sm_90", "compute_90", "sm_90a", "gfx90a",
// "gfx90a:xnack-".
func parseTarget(s string) (target, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	bad := func() (target, error) {
		return target{}, fmt.Errorf("rtc: target %q is not sm_XX, compute_XX or gfxNNN: %w", s, gpumem.ErrInvalidValue)
	}
	for _, p := range []string{"sm_", "compute_"} {
		if num, ok := strings.CutPrefix(s, p); ok {
			digits := strings.TrimRight(num, "af")
			if len(digits) < 2 || len(num)-len(digits) > 1 || strings.Trim(digits, "0123456789") != "" {
				return bad()
			}
			return target{vendor: symtab.CUDA, name: "sm_" + num, base: "sm_" + digits, num: num}, nil
		}
	}
	if strings.HasPrefix(s, "gfx") {
		base, feats, _ := strings.Cut(s, ":")
		if len(base) < 6 || strings.Trim(base[3:], "0123456789abcdef") != "" {
			return bad()
		}
		for _, f := range strings.Split(feats, ":") {
			if feats != "" && (len(f) < 2 || (f[len(f)-1] != '+' && f[len(f)-1] != '-') || strings.Trim(f[:len(f)-1], "abcdefghijklmnopqrstuvwxyz0123456789") != "") {
				return bad()
			}
		}
		return target{vendor: symtab.HIP, name: s, base: base}, nil
	}
	return bad()
}

// vendorOfTarget is the vendor whose compiler a target needs.
func vendorOfTarget(s string) (symtab.Vendor, error) {
	t, err := parseTarget(s)
	if err != nil {
		return 0, err
	}
	return t.vendor, nil
}

// BackendOf names the backend whose compiler builds for target: "cuda" for
// sm_XX and compute_XX, "hip" for gfxNNN.
func BackendOf(target string) (string, error) {
	v, err := vendorOfTarget(target)
	if err != nil {
		return "", err
	}
	return v.String(), nil
}

// loadTargets fills the supported set: nvrtcGetSupportedArchs where the
// library has it, else the targets table's row for the version. A version
// older than the table's first row takes the first row; newer than its last
// is left open (nil), as those compilers report an unknown target
// themselves.
func (c *Compiler) loadTargets() {
	if c.vendor == symtab.CUDA {
		if archs, err := c.supportedArchs(); err == nil && len(archs) > 0 {
			for _, a := range archs {
				c.supported = append(c.supported, "sm_"+strconv.Itoa(a))
			}
			c.supportedSrc = "nvrtcGetSupportedArchs"
			c.index()
			return
		}
	}
	ver := symtab.RTCVersionNumber(c.major, c.minor)
	row, ok := symtab.RTCTargetsFor(c.vendor, ver)
	if !ok {
		first := true
		for _, r := range symtab.RTCTargetTable {
			if r.Vendor == c.vendor && first {
				first = false
				if ver < r.From {
					row, ok = r, true
				}
			}
		}
	}
	if !ok {
		return
	}
	c.supported = append([]string(nil), row.Targets...)
	c.supportedSrc = "the targets table (" + row.Notes + ")"
	c.index()
}

func (c *Compiler) index() {
	c.supportedSet = make(map[string]bool, len(c.supported))
	for _, t := range c.supported {
		c.supportedSet[t] = true
	}
	sort.Slice(c.supported, func(i, j int) bool { return targetLess(c.supported[i], c.supported[j]) })
}

// targetLess orders targets by number: sm_75 < sm_80 < sm_100.
func targetLess(a, b string) bool {
	na, nb := strings.TrimLeft(a, "smgfx_"), strings.TrimLeft(b, "smgfx_")
	if len(na) != len(nb) {
		return len(na) < len(nb)
	}
	return na < nb
}

// SupportedTargets lists the targets the compiler supports, oldest first,
// and where the list comes from; nil when the compiler is newer than the
// targets table (every well-formed target is passed to it).
func (c *Compiler) SupportedTargets() (targets []string, source string) {
	if c == nil {
		return nil, ""
	}
	return append([]string(nil), c.supported...), c.supportedSrc
}

// CheckTarget returns the *TargetError Compile would return for target,
// or nil when the compiler supports it.
func (c *Compiler) CheckTarget(s string) error {
	if c == nil {
		return errNil("CheckTarget")
	}
	_, err := c.target(s)
	return err
}

// target parses s ("" for the newest supported) and refuses what the
// compiler does not support, before any compiler call.
func (c *Compiler) target(s string) (target, error) {
	if s == "" {
		if len(c.supported) == 0 {
			return target{}, fmt.Errorf("rtc: %s: no target given and none known: %w", c, gpumem.ErrInvalidValue)
		}
		s = c.supported[len(c.supported)-1]
	}
	t, err := parseTarget(s)
	if err != nil {
		return target{}, err
	}
	if t.vendor != c.vendor {
		return target{}, fmt.Errorf("rtc: %s cannot compile for %s (a %s target): %w", c, s, t.vendor, gpumem.ErrInvalidValue)
	}
	if c.supportedSet != nil && !c.supportedSet[t.base] {
		return target{}, &TargetError{Compiler: c.String(), Target: s, Supported: append([]string(nil), c.supported...), Source: c.supportedSrc}
	}
	return t, nil
}

// Targets returns the targets table: which targets each compiler version
// supports, as kept by the project.
func Targets() []TargetRow {
	var out []TargetRow
	for _, r := range symtab.RTCTargetTable {
		out = append(out, TargetRow{
			Compiler: symtab.RTCTableNames[r.Vendor],
			From:     fmt.Sprintf("%d.%d", r.From/1000, r.From%1000/10),
			To:       fmt.Sprintf("%d.%d", r.To/1000, r.To%1000/10),
			Targets:  append([]string(nil), r.Targets...),
			Notes:    r.Notes,
		})
	}
	return out
}

// TargetRow is one row of the targets table.
type TargetRow struct {
	Compiler string   // "nvrtc", "hiprtc"
	From, To string   // compiler versions, inclusive: "5.0", "5.2"
	Targets  []string // sm_XX or gfxNNN
	Notes    string
}
