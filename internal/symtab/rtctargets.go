package symtab

import "strings"

// RTCTargets is one row of a compiler's targets table: the targets every
// version from From through To (1000*major + 10*minor, both inclusive)
// compiles for. A version newer than a vendor's last row is not refused
// here: the compilers of those releases report an unknown target as an
// error of their own (it is ROCm 5's hipRTC that aborts the process).
type RTCTargets struct {
	Vendor  Vendor
	From    int
	To      int
	Targets []string // CUDA: sm_XX (the compute_XX of the same number); HIP: gfxNNN
	Notes   string
}

// RTCVersionNumber encodes a compiler version as the targets table does.
func RTCVersionNumber(major, minor int) int { return 1000*major + 10*minor }

func sms(nums string) []string {
	var out []string
	for _, n := range strings.Fields(nums) {
		out = append(out, "sm_"+n)
	}
	return out
}

const (
	hip52 = "gfx600 gfx601 gfx602 gfx700 gfx701 gfx702 gfx703 gfx704 gfx705 gfx801 gfx802 gfx803 gfx805 gfx810 " +
		"gfx900 gfx902 gfx904 gfx906 gfx908 gfx909 gfx90a gfx90c " +
		"gfx1010 gfx1011 gfx1012 gfx1013 gfx1030 gfx1031 gfx1032 gfx1033 gfx1034 gfx1035 gfx1036"
	hip53 = hip52 + " gfx940 gfx1100 gfx1101 gfx1102 gfx1103"
	hip55 = hip53 + " gfx941 gfx942"
	hip60 = hip55 + " gfx1150 gfx1151"
	hip62 = hip60 + " gfx1152 gfx1200 gfx1201"
	hip64 = hip62 + " gfx950 gfx1153"
)

// RTCTargetTable is which targets each compiler version supports, as data.
// NVRTC 11.2 and newer answer nvrtcGetSupportedArchs, which wins over these
// rows; the rows are the fallback and the documentation. hipRTC has no such
// query: its rows are the only guard against the abort of ROCm 5.2's hipRTC
// (libc "munmap_chunk(): invalid pointer") on a target it does not know.
var RTCTargetTable = []RTCTargets{
	{CUDA, RTCVersionNumber(11, 2), RTCVersionNumber(11, 7), sms("35 37 50 52 53 60 61 62 70 72 75 80 86 87"),
		"CUDA 11.2-11.7 (sm_87 from 11.4)"},
	{CUDA, RTCVersionNumber(11, 8), RTCVersionNumber(11, 8), sms("35 37 50 52 53 60 61 62 70 72 75 80 86 87 89 90"),
		"CUDA 11.8: Ada and Hopper; checked against nvrtcGetSupportedArchs of Debian's libnvrtc11.2 (11.8.89)"},
	{CUDA, RTCVersionNumber(12, 0), RTCVersionNumber(12, 7), sms("50 52 53 60 61 62 70 72 75 80 86 87 89 90"),
		"CUDA 12.0: Kepler removed; sm_90a accepted as sm_90"},
	{CUDA, RTCVersionNumber(12, 8), RTCVersionNumber(12, 8), sms("50 52 53 60 61 62 70 72 75 80 86 87 89 90 100 101 120"),
		"CUDA 12.8: Blackwell"},
	{CUDA, RTCVersionNumber(12, 9), RTCVersionNumber(12, 9), sms("50 52 53 60 61 62 70 72 75 80 86 87 89 90 100 101 103 120 121"),
		"CUDA 12.9"},
	{CUDA, RTCVersionNumber(13, 0), RTCVersionNumber(13, 9), sms("75 80 86 87 88 89 90 100 103 110 120 121"),
		"CUDA 13: Maxwell, Pascal and Volta removed; sm_101 renamed sm_110"},
	{HIP, RTCVersionNumber(5, 0), RTCVersionNumber(5, 2), strings.Fields(hip52),
		"ROCm 5.0-5.2: comgr's ISA table, read from libamd-comgr2 5.2.3 (Debian bookworm); gfx940 and gfx11 abort the process"},
	{HIP, RTCVersionNumber(5, 3), RTCVersionNumber(5, 4), strings.Fields(hip53), "ROCm 5.3: gfx940, gfx11"},
	{HIP, RTCVersionNumber(5, 5), RTCVersionNumber(5, 7), strings.Fields(hip55), "ROCm 5.5: gfx941, gfx942"},
	{HIP, RTCVersionNumber(6, 0), RTCVersionNumber(6, 1), strings.Fields(hip60), "ROCm 6.0: gfx1150, gfx1151"},
	{HIP, RTCVersionNumber(6, 2), RTCVersionNumber(6, 3), strings.Fields(hip62), "ROCm 6.2: gfx1152, gfx12"},
	{HIP, RTCVersionNumber(6, 4), RTCVersionNumber(7, 9), strings.Fields(hip64), "ROCm 6.4: gfx950, gfx1153"},
}

// RTCTargetsFor returns the row for the vendor's compiler at version, or
// false when the table has none (a version older than the first row, or
// newer than the last).
func RTCTargetsFor(v Vendor, version int) (RTCTargets, bool) {
	for _, r := range RTCTargetTable {
		if r.Vendor == v && version >= r.From && version <= r.To {
			return r, true
		}
	}
	return RTCTargets{}, false
}
