package kernel

import (
	"fmt"
)

// Arg is the declared kind of one kernel parameter, with its size and
// alignment in bytes.
type Arg uint64

// kind of an Arg (its low byte).
type kind uint8

const (
	kPtr kind = iota + 1
	kInt8
	kInt16
	kInt32
	kInt64
	kUint8
	kUint16
	kUint32
	kUint64
	kFloat32
	kFloat64
	kStruct
)

var kindNames = [...]string{
	kPtr: "Ptr", kInt8: "Int8", kInt16: "Int16", kInt32: "Int32", kInt64: "Int64",
	kUint8: "Uint8", kUint16: "Uint16", kUint32: "Uint32", kUint64: "Uint64",
	kFloat32: "Float32", kFloat64: "Float64", kStruct: "Struct",
}

func mkArg(k kind, size, align uint64) Arg { return Arg(uint64(k) | align<<8 | size<<16) }

func (a Arg) kind() kind     { return kind(a & 0xff) }
func (a Arg) align() uintptr { return uintptr(a >> 8 & 0xff) }

// Size is the argument's size in bytes.
func (a Arg) Size() int { return int(a >> 16) }

// Parameter kinds.
const (
	Ptr     = Arg(uint64(kPtr) | 8<<8 | 8<<16)     // gpumem.Ptr: a device, pinned or managed address
	Int8    = Arg(uint64(kInt8) | 1<<8 | 1<<16)    // int8_t, signed char
	Int16   = Arg(uint64(kInt16) | 2<<8 | 2<<16)   // int16_t, short
	Int32   = Arg(uint64(kInt32) | 4<<8 | 4<<16)   // int32_t, int
	Int64   = Arg(uint64(kInt64) | 8<<8 | 8<<16)   // int64_t, long long
	Uint8   = Arg(uint64(kUint8) | 1<<8 | 1<<16)   // uint8_t, unsigned char
	Uint16  = Arg(uint64(kUint16) | 2<<8 | 2<<16)  // uint16_t
	Uint32  = Arg(uint64(kUint32) | 4<<8 | 4<<16)  // uint32_t, unsigned int
	Uint64  = Arg(uint64(kUint64) | 8<<8 | 8<<16)  // uint64_t, size_t
	Float32 = Arg(uint64(kFloat32) | 4<<8 | 4<<16) // float
	Float64 = Arg(uint64(kFloat64) | 8<<8 | 8<<16) // double
)

// scalars are the declarations of the kinds other than Struct, by kind:
// the only sizes and alignments those kinds have.
var scalars = [...]Arg{
	kPtr: Ptr, kInt8: Int8, kInt16: Int16, kInt32: Int32, kInt64: Int64,
	kUint8: Uint8, kUint16: Uint16, kUint32: Uint32, kUint64: Uint64,
	kFloat32: Float32, kFloat64: Float64,
}

// MaxStructSize bounds a struct argument (CUDA's limit on all of a
// kernel's parameters together is 32764 bytes on recent devices, 4096 on
// older ones).
const MaxStructSize = 32764

// MaxParamBytes bounds all of a kernel's parameters together, laid out as
// the kernel sees them (each at a multiple of its alignment, in order):
// CUDA's limit since 12.1 on Volta and later, the largest any vendor
// accepts. New refuses a signature over it on every backend, including
// those that cannot report a kernel's parameters (HIP), where the vendor
// would otherwise read argument bytes the declaration does not hold. A
// vendor with a lower limit (CUDA on older devices: 4096) refuses the
// launch itself.
const MaxParamBytes = 32764

// Struct declares a struct parameter passed by value: size bytes aligned
// to align (a power of two from 1 to 16; size a positive multiple of it, as
// C lays structs out). New reports a bad size or alignment.
func Struct(size, align int) Arg {
	if size < 0 || size >= 1<<31 || align < 0 || align > 255 {
		return mkArg(kStruct, 0, 0) // not representable: New reports it
	}
	return mkArg(kStruct, uint64(size), uint64(align)) // New reports a size over MaxStructSize
}

// valid reports why a is not a usable declaration ("" when it is).
func (a Arg) valid() string {
	k := a.kind()
	if k < kPtr || k > kStruct || a>>48 != 0 {
		return fmt.Sprintf("unknown argument kind %#x", uint64(a))
	}
	if k != kStruct {
		if a != scalars[k] {
			return fmt.Sprintf("unknown argument kind %#x (a %s of %d bytes aligned to %d)", uint64(a), kindNames[k], a.Size(), a.align())
		}
		return ""
	}
	size, align := a.Size(), int(a.align())
	if size == 0 && align == 0 {
		return fmt.Sprintf("Struct size or alignment out of range (want a size from 1 to %d, a multiple of an alignment that is a power of two from 1 to 16)", MaxStructSize)
	}
	if align == 0 || align > 16 || align&(align-1) != 0 {
		return fmt.Sprintf("Struct alignment %d (want a power of two from 1 to 16)", align)
	}
	if size == 0 || size > MaxStructSize || size%align != 0 {
		return fmt.Sprintf("Struct size %d (want a positive multiple of its alignment %d, at most %d)", size, align, MaxStructSize)
	}
	return ""
}

// String names the kind ("Float32", "Struct(24, 8)").
func (a Arg) String() string {
	k := a.kind()
	if k == kStruct {
		return fmt.Sprintf("Struct(%d, %d)", a.Size(), a.align())
	}
	if k >= kPtr && k < kStruct {
		return kindNames[k]
	}
	return fmt.Sprintf("Arg(%#x)", uint64(a))
}
