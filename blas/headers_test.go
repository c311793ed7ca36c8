package blas

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumem/gpumem/bind"
)

// The tables and dialects against the headers of the version whose
// library .ci/libs-blas.sh also loads: GPUMEM_TEST_BLAS_INCLUDE is a
// Debian suite's /usr/include (libhipblas-dev, libhipblas-common-dev,
// librocblas-dev, libamdhip64-dev), GPUMEM_TEST_HIPBLAS_LIBRARY the
// hipBLAS file, whose soname's major version says which dialect the
// binding speaks. Every symbol a table names is declared with the table's
// argument count, GemmEx with the dialect's types, and every enum value a
// dialect passes is the header's.
func TestBLASHeaders(t *testing.T) {
	inc := os.Getenv("GPUMEM_TEST_BLAS_INCLUDE")
	if inc == "" {
		t.Skip("GPUMEM_TEST_BLAS_INCLUDE is not set (.ci/libs-blas.sh sets it)")
	}
	hip := readHeaders(t, inc, func(p string) bool {
		b := filepath.Base(p)
		return strings.HasPrefix(b, "hipblas") && strings.HasSuffix(b, ".h") || b == "library_types.h"
	})
	roc := readHeaders(t, inc, func(p string) bool {
		return strings.Contains(p, "rocblas") && strings.HasSuffix(p, ".h")
	})
	major := strings.TrimPrefix(filepath.Base(os.Getenv("GPUMEM_TEST_HIPBLAS_LIBRARY")), "libhipblas.so.")
	major, _, _ = strings.Cut(major, ".")
	v, err := strconv.Atoi(major)
	if err != nil {
		t.Fatalf("no hipBLAS version in GPUMEM_TEST_HIPBLAS_LIBRARY: %q", major)
	}
	d, ex := hipblasDialectV1, "hipblasGemmEx"
	switch {
	case v == 2:
		d, ex = hipblasDialectV2, "hipblasGemmEx_v2"
	case v >= 3:
		d = hipblasDialectV3
	}
	t.Logf("hipBLAS %d: GemmEx is %s", v, ex)

	declared(t, hip, hipblasTable)
	declared(t, roc, rocblasTable)

	// hipBLAS's enums and GemmEx.
	enums(t, hip, map[string]uintptr{
		"HIPBLAS_OP_N": d.trans[NoTrans], "HIPBLAS_OP_T": d.trans[Trans], "HIPBLAS_OP_C": d.trans[ConjTrans],
		"HIPBLAS_GEMM_DEFAULT":             d.exAlgo,
		"HIPBLAS_STATUS_SUCCESS":           0,
		"HIPBLAS_STATUS_NOT_INITIALIZED":   1,
		"HIPBLAS_STATUS_ALLOC_FAILED":      2,
		"HIPBLAS_STATUS_INVALID_VALUE":     3,
		"HIPBLAS_STATUS_NOT_SUPPORTED":     7,
		"HIPBLAS_STATUS_ARCH_MISMATCH":     8,
		"HIPBLAS_STATUS_HANDLE_IS_NULLPTR": 9,
	})
	params := decl(t, hip, ex)
	wantType, wantCompute := "hipblasDatatype_t", "hipblasDatatype_t"
	if v >= 2 {
		wantType, wantCompute = "hipDataType", "hipblasComputeType_t"
		enums(t, hip, map[string]uintptr{
			"HIP_R_32F": d.exType[F32], "HIP_R_64F": d.exType[F64], "HIP_R_16F": d.exType[F16], "HIP_R_16BF": d.exType[BF16],
			"HIPBLAS_COMPUTE_32F": d.exCompute,
		})
	} else {
		enums(t, hip, map[string]uintptr{
			"HIPBLAS_R_32F": d.exType[F32], "HIPBLAS_R_64F": d.exType[F64], "HIPBLAS_R_16F": d.exType[F16], "HIPBLAS_R_16B": d.exType[BF16],
		})
		if d.exCompute != d.exType[F32] {
			t.Errorf("hipBLAS %d's compute type is a datatype: %d, want HIPBLAS_R_32F", v, d.exCompute)
		}
	}
	if len(params) != 19 {
		t.Errorf("%s: declared with %d parameters, want 19", ex, len(params))
	} else {
		for _, p := range []struct {
			i    int
			want string
		}{{8, wantType}, {11, wantType}, {15, wantType}, {17, wantCompute}, {18, "hipblasGemmAlgo_t"}, {1, "hipblasOperation_t"}} {
			if !strings.HasPrefix(params[p.i], p.want+" ") {
				t.Errorf("%s parameter %d is %q, want a %s", ex, p.i, params[p.i], p.want)
			}
		}
	}

	// rocBLAS's.
	r := rocblasDialect
	enums(t, roc, map[string]uintptr{
		"rocblas_operation_none": r.trans[NoTrans], "rocblas_operation_transpose": r.trans[Trans], "rocblas_operation_conjugate_transpose": r.trans[ConjTrans],
		"rocblas_pointer_mode_host": r.pointer[Host], "rocblas_pointer_mode_device": r.pointer[Device],
		"rocblas_datatype_f32_r": r.exType[F32], "rocblas_datatype_f64_r": r.exType[F64], "rocblas_datatype_f16_r": r.exType[F16], "rocblas_datatype_bf16_r": r.exType[BF16],
		"rocblas_gemm_algo_standard":    r.exAlgo,
		"rocblas_status_invalid_handle": 1, "rocblas_status_not_implemented": 2, "rocblas_status_invalid_pointer": 3,
		"rocblas_status_invalid_size": 4, "rocblas_status_memory_error": 5, "rocblas_status_invalid_value": 11,
	})
	if r.exCompute != r.exType[F32] {
		t.Errorf("rocBLAS compute type %d, want rocblas_datatype_f32_r", r.exCompute)
	}
	p := decl(t, roc, "rocblas_gemm_ex")
	if len(p) != 24 || (!strings.HasPrefix(p[17], "void*") && !strings.HasPrefix(p[17], "void *") || !strings.HasPrefix(p[20], "rocblas_datatype ")) {
		t.Errorf("rocblas_gemm_ex: d is %q, compute_type %q", p[17], p[20])
	}
}

var (
	comments = regexp.MustCompile(`(?s)/\*.*?\*/|//[^\n]*`)
	spaces   = regexp.MustCompile(`\s+`)
)

// readHeaders concatenates the headers under dir that keep selects,
// comments removed.
func readHeaders(t *testing.T, dir string, keep func(string) bool) string {
	t.Helper()
	var b strings.Builder
	n := 0
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !keep(p) {
			return err
		}
		text, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		n++
		b.WriteString(comments.ReplaceAllString(string(text), " "))
		b.WriteByte('\n')
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("no headers under %s (%v)", dir, err)
	}
	return b.String()
}

// decl returns the parameters of the exported declaration of sym, nil if
// the headers do not declare it.
func decl(t *testing.T, text, sym string) []string {
	t.Helper()
	re := regexp.MustCompile(`\b` + regexp.QuoteMeta(sym) + `\s*\(`)
	for _, loc := range re.FindAllStringIndex(text, -1) {
		start := strings.LastIndexAny(text[:loc[0]], ";{}")
		if !strings.Contains(text[start+1:loc[0]], "_EXPORT") {
			continue
		}
		depth, i := 1, loc[1]
		for ; i < len(text) && depth > 0; i++ {
			switch text[i] {
			case '(':
				depth++
			case ')':
				depth--
			}
		}
		body := strings.TrimSpace(spaces.ReplaceAllString(text[loc[1]:i-1], " "))
		if body == "" || body == "void" {
			return []string{}
		}
		var params []string
		depth, last := 0, 0
		for j, c := range body {
			switch c {
			case '(':
				depth++
			case ')':
				depth--
			case ',':
				if depth == 0 {
					params = append(params, strings.TrimSpace(body[last:j]))
					last = j + 1
				}
			}
		}
		return append(params, strings.TrimSpace(body[last:]))
	}
	return nil
}

// declared checks every symbol of tab against its declaration: required
// symbols must be declared, and every declared one with the row's count.
func declared(t *testing.T, text string, tab *bind.Table) {
	t.Helper()
	n := 0
	for _, r := range tab.Rows {
		sym := r.Symbol[bind.HIP]
		if sym == "" {
			continue
		}
		p := decl(t, text, sym)
		switch {
		case p == nil && r.Required[bind.HIP]:
			t.Errorf("%s: required %s is not declared", tab.Name, sym)
		case p == nil:
			t.Logf("%s: optional %s is not declared in this version", tab.Name, sym)
		case len(p) != words(r.Args):
			t.Errorf("%s: %s takes %d parameters (%q), the table says %d", tab.Name, sym, len(p), p, words(r.Args))
		default:
			n++
		}
	}
	t.Logf("%s: %d declarations match the table", tab.Name, n)
}

// enums checks enumerators' values as the headers define them.
func enums(t *testing.T, text string, want map[string]uintptr) {
	t.Helper()
	for name, v := range want {
		m := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\s*=\s*(0x[0-9a-fA-F]+|-?\d+)`).FindStringSubmatch(text)
		if m == nil {
			t.Errorf("%s has no value in the headers", name)
			continue
		}
		got, err := strconv.ParseInt(m[1], 0, 64)
		if err != nil || uintptr(got) != v {
			t.Errorf("%s = %s in the headers, the binding passes %d", name, m[1], v)
		}
	}
}

// words is the argument count an arity declares (the same for both vendors
// in the BLAS tables).
func words(a bind.Arity) int {
	n, _ := a.Words(bind.HIP)
	return n
}
