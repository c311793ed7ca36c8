package hip

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/native"
	"github.com/gpumem/gpumem/internal/symtab"
)

// TestEnumsAgainstHeaders compiles a small C program against the HIP headers
// (GPUMEM_TEST_HIP_INCLUDE, provisioned by .ci/vendor-libs.sh) and checks
// every value and layout the backend uses against what the compiler says.
func TestEnumsAgainstHeaders(t *testing.T) {
	inc := os.Getenv("GPUMEM_TEST_HIP_INCLUDE")
	gcc, gccErr := exec.LookPath("gcc")
	switch {
	case inc != "" && gccErr == nil:
	case os.Getenv("CI") == "true":
		t.Fatalf("under CI the HIP header check must run: GPUMEM_TEST_HIP_INCLUDE=%q, gcc: %v", inc, gccErr)
	case inc == "":
		t.Skip("GPUMEM_TEST_HIP_INCLUDE is not set: run .ci/vendor-libs.sh DIR to extract the HIP headers")
	default:
		t.Skip("no gcc to compile the header check: ", gccErr)
	}
	want := map[string]int64{}
	for a, v := range attributes {
		want[attrHeaderName[a]] = int64(v)
	}
	for a, v := range advices {
		want[adviceHeaderName[a]] = int64(v)
	}
	for a, name := range funcAttrHeaderName {
		v, ok := funcAttribute(a)
		if !ok {
			t.Errorf("function attribute %d has no translation", a)
		}
		want[name] = int64(v)
	}
	for _, s := range symtab.Statuses[symtab.HIP].Statuses {
		want[s.Name] = int64(s.Code)
	}
	for code, name := range map[int]string{
		native.StatusNotReady: "hipErrorNotReady", native.StatusPeerAlreadyEnabled: "hipErrorPeerAccessAlreadyEnabled",
		native.StatusNotInitialized: "hipErrorNotInitialized", native.StatusDeinitialized: "hipErrorDeinitialized",
	} {
		want[name] = int64(code)
	}
	for name, v := range map[string]int64{
		"hipMemLocationTypeDevice": native.LocationTypeDevice, "hipMemAllocationTypePinned": native.AllocationTypePinned,
		"hipMemAccessFlagsProtNone": native.AccessNone, "hipMemAccessFlagsProtRead": native.AccessRead,
		"hipMemAccessFlagsProtReadWrite": native.AccessReadWrite, "hipCpuDeviceId": native.DeviceCPU,
		"hipInvalidDeviceId": native.DeviceInvalid, "hipMemRangeAttributePreferredLocation": native.RangePreferredLocation,
		"hipMemRangeAttributeLastPrefetchLocation": native.RangeLastPrefetch, "hipMemcpyDefault": native.MemcpyDefault,
		"hipHostMallocPortable": native.HostAllocPortable, "hipMemAttachGlobal": native.MemAttachGlobal,
		"hipMemAllocationGranularityMinimum": 0, "hipMemAllocationGranularityRecommended": 1,
		"hipStreamCaptureModeGlobal": int64(gpumem.CaptureModeGlobal), "hipStreamCaptureModeThreadLocal": int64(gpumem.CaptureModeThreadLocal),
		"hipStreamCaptureModeRelaxed": int64(gpumem.CaptureModeRelaxed), "hipStreamCaptureStatusNone": int64(gpumem.CaptureNone),
		"hipStreamCaptureStatusActive": int64(gpumem.CaptureActive), "hipStreamCaptureStatusInvalidated": int64(gpumem.CaptureInvalidated),
		"hipMemPoolReuseFollowEventDependencies": 1, "hipMemPoolReuseAllowOpportunistic": 2,
		"hipMemPoolReuseAllowInternalDependencies": 3, "hipMemPoolAttrReleaseThreshold": 4,
		"hipMemPoolAttrReservedMemCurrent": 5, "hipMemPoolAttrReservedMemHigh": 6,
		"hipMemPoolAttrUsedMemCurrent": 7, "hipMemPoolAttrUsedMemHigh": 8,
		"hipStreamNonBlocking": int64(gpumem.StreamNonBlocking), "hipEventBlockingSync": int64(gpumem.EventBlockingSync),
		"hipEventDisableTiming":   int64(gpumem.EventDisableTiming),
		"sizeof(hipMemPoolProps)": native.PoolPropsSize, "offsetof(hipMemPoolProps, location)": 8,
		"sizeof(hipMemAllocationProp)": native.AllocPropSize, "sizeof(hipMemAccessDesc)": native.AccessDescSize,
		"offsetof(hipMemAccessDesc, flags)": 8, "sizeof(hipMemLocation)": 8,
	} {
		want[name] = v
	}
	// The allocation-property layout the backend writes for this header's
	// version (5.x: compressionType first; 6+: CUDA-like).
	if headerVersion(t, inc) < hip6 {
		for name, v := range map[string]int64{"offsetof(hipMemAllocationProp, location)": 4,
			"offsetof(hipMemAllocationProp, type)": 16, "offsetof(hipMemAllocationProp, requestedHandleType)": 12} {
			want[name] = v
		}
	} else {
		for name, v := range map[string]int64{"offsetof(hipMemAllocationProp, location)": 8,
			"offsetof(hipMemAllocationProp, type)": 0, "offsetof(hipMemAllocationProp, requestedHandleType)": 4,
			"offsetof(hipMemPoolProps, maxSize)": 24} {
			want[name] = v
		}
	}

	dir := t.TempDir()
	var src strings.Builder
	src.WriteString("#define __HIP_PLATFORM_AMD__ 1\n#include <hip/hip_runtime_api.h>\n#include <stdio.h>\n#include <stddef.h>\nint main(void) {\n")
	for name := range want {
		src.WriteString("  printf(\"%s %lld\\n\", \"" + strings.ReplaceAll(name, " ", "") + "\", (long long)(" + name + "));\n")
	}
	src.WriteString("  return 0;\n}\n")
	c := filepath.Join(dir, "check.c")
	if err := os.WriteFile(c, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "check")
	if out, err := exec.Command(gcc, "-I", inc, "-o", bin, c).CombinedOutput(); err != nil {
		t.Fatalf("compiling the header check: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		v, _ := strconv.ParseInt(f[1], 10, 64)
		got[f[0]] = v
	}
	for name, w := range want {
		if g, ok := got[strings.ReplaceAll(name, " ", "")]; !ok || g != w {
			t.Errorf("%s: header says %d, backend uses %d", name, g, w)
		}
	}
}

func headerVersion(t *testing.T, inc string) int {
	b, err := os.ReadFile(filepath.Join(inc, "hip", "hip_version.h"))
	if err != nil {
		t.Fatal(err)
	}
	var major, minor, patch int
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 3 && f[0] == "#define" {
			n, _ := strconv.Atoi(f[2])
			switch f[1] {
			case "HIP_VERSION_MAJOR":
				major = n
			case "HIP_VERSION_MINOR":
				minor = n
			case "HIP_VERSION_PATCH":
				patch = n
			}
		}
	}
	return major*10000000 + minor*100000 + patch
}

var attrHeaderName = map[gpumem.Attribute]string{
	gpumem.AttrComputeCapabilityMajor:  "hipDeviceAttributeComputeCapabilityMajor",
	gpumem.AttrComputeCapabilityMinor:  "hipDeviceAttributeComputeCapabilityMinor",
	gpumem.AttrMultiprocessorCount:     "hipDeviceAttributeMultiprocessorCount",
	gpumem.AttrUnifiedAddressing:       "hipDeviceAttributeUnifiedAddressing",
	gpumem.AttrManagedMemory:           "hipDeviceAttributeManagedMemory",
	gpumem.AttrConcurrentManagedAccess: "hipDeviceAttributeConcurrentManagedAccess",
	gpumem.AttrPageableMemoryAccess:    "hipDeviceAttributePageableMemoryAccess",
	gpumem.AttrCanMapHostMemory:        "hipDeviceAttributeCanMapHostMemory",
	gpumem.AttrMemoryPoolsSupported:    "hipDeviceAttributeMemoryPoolsSupported",
	gpumem.AttrIntegrated:              "hipDeviceAttributeIntegrated",
	gpumem.AttrPCIBusID:                "hipDeviceAttributePciBusId",
	gpumem.AttrPCIDeviceID:             "hipDeviceAttributePciDeviceId",
	gpumem.AttrClockRateKHz:            "hipDeviceAttributeClockRate",
	gpumem.AttrMemoryClockRateKHz:      "hipDeviceAttributeMemoryClockRate",
	gpumem.AttrGlobalMemoryBusWidth:    "hipDeviceAttributeMemoryBusWidth",
	gpumem.AttrL2CacheSize:             "hipDeviceAttributeL2CacheSize",
}

var adviceHeaderName = map[gpumem.Advice]string{
	gpumem.AdviseSetReadMostly:          "hipMemAdviseSetReadMostly",
	gpumem.AdviseUnsetReadMostly:        "hipMemAdviseUnsetReadMostly",
	gpumem.AdviseSetPreferredLocation:   "hipMemAdviseSetPreferredLocation",
	gpumem.AdviseUnsetPreferredLocation: "hipMemAdviseUnsetPreferredLocation",
	gpumem.AdviseSetAccessedBy:          "hipMemAdviseSetAccessedBy",
	gpumem.AdviseUnsetAccessedBy:        "hipMemAdviseUnsetAccessedBy",
	gpumem.AdviseSetCoarseGrain:         "hipMemAdviseSetCoarseGrain",
	gpumem.AdviseUnsetCoarseGrain:       "hipMemAdviseUnsetCoarseGrain",
}

func TestSentinels(t *testing.T) {
	for code, want := range map[int]error{2: gpumem.ErrOutOfMemory, 100: gpumem.ErrNoDevice, 801: gpumem.ErrNotSupported,
		1: gpumem.ErrInvalidValue, 400: gpumem.ErrInvalidValue, 101: gpumem.ErrInvalidValue, 999: nil,
		900: gpumem.ErrInvalidValue, 901: gpumem.ErrInvalidValue, 908: gpumem.ErrInvalidValue, 909: nil} {
		if got := symtab.Statuses[symtab.HIP].Sentinel(code, false); got != want {
			t.Errorf("sentinel(%d) = %v, want %v", code, got, want)
		}
	}
	if _, ok := attribute(gpumem.AttrVirtualMemoryManagement); ok {
		t.Error("HIP 5.2 has no virtual-memory-management attribute; the backend must say not supported")
	}
	if len(attributes) != len(attrHeaderName) || len(advices) != len(adviceHeaderName) {
		t.Error("header-name tables do not cover the translation tables")
	}
}

// funcAttrHeaderName names each function attribute's hipFunction_attribute.
var funcAttrHeaderName = map[gpumem.FuncAttribute]string{
	gpumem.FuncMaxThreadsPerBlock:        "HIP_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK",
	gpumem.FuncSharedSizeBytes:           "HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES",
	gpumem.FuncConstSizeBytes:            "HIP_FUNC_ATTRIBUTE_CONST_SIZE_BYTES",
	gpumem.FuncLocalSizeBytes:            "HIP_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES",
	gpumem.FuncNumRegs:                   "HIP_FUNC_ATTRIBUTE_NUM_REGS",
	gpumem.FuncPTXVersion:                "HIP_FUNC_ATTRIBUTE_PTX_VERSION",
	gpumem.FuncBinaryVersion:             "HIP_FUNC_ATTRIBUTE_BINARY_VERSION",
	gpumem.FuncMaxDynamicSharedSizeBytes: "HIP_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES",
}
