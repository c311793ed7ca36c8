package collective

import "fmt"

// UniqueIDBytes is the size of an ncclUniqueId (NCCL_UNIQUE_ID_BYTES).
const UniqueIDBytes = 128

// UniqueID names a communicator that several processes (or goroutines)
// join with InitRank: one rank makes it with NewUniqueID and hands its
// bytes to the others by any means.
type UniqueID [UniqueIDBytes]byte

// DataType is an element type (ncclDataType_t). The values are nccl.h's
// and RCCL's, which agree: RCCL 5.4 stops at Bfloat16; NCCL 2.19+ and RCCL
// 6.x add the two 8-bit float types.
type DataType int32

// Element types.
const (
	Int8     DataType = 0 // ncclInt8, ncclChar
	Uint8    DataType = 1 // ncclUint8
	Int32    DataType = 2 // ncclInt32, ncclInt
	Uint32   DataType = 3 // ncclUint32
	Int64    DataType = 4 // ncclInt64
	Uint64   DataType = 5 // ncclUint64
	Float16  DataType = 6 // ncclFloat16, ncclHalf
	Float32  DataType = 7 // ncclFloat32, ncclFloat
	Float64  DataType = 8 // ncclFloat64, ncclDouble
	Bfloat16 DataType = 9 // ncclBfloat16
	// Float8E4M3 is ncclFloat8e4m3 (NCCL 2.19+; RCCL 6's ncclFp8E4M3).
	Float8E4M3 DataType = 10
	// Float8E5M2 is ncclFloat8e5m2 (NCCL 2.19+; RCCL 6's ncclFp8E5M2).
	Float8E5M2 DataType = 11

	numTypes = 12
)

var typeNames = [numTypes]string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64", "bfloat16", "float8e4m3", "float8e5m2"}

var typeSizes = [numTypes]uint64{1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1}

// Size is the size of one element in bytes (0 for an unknown type).
func (t DataType) Size() int {
	if t < 0 || t >= numTypes {
		return 0
	}
	return int(typeSizes[t])
}

// String names the type.
func (t DataType) String() string {
	if t < 0 || t >= numTypes {
		return fmt.Sprintf("DataType(%d)", int32(t))
	}
	return typeNames[t]
}

// Op is a built-in reduction (ncclRedOp_t; the same values in RCCL).
type Op int32

// Reductions.
const (
	Sum  Op = 0 // ncclSum
	Prod Op = 1 // ncclProd
	Max  Op = 2 // ncclMax
	Min  Op = 3 // ncclMin
	Avg  Op = 4 // ncclAvg (NCCL 2.10+): the sum divided by the number of ranks

	numOps = 5
)

var opNames = [numOps]string{"sum", "prod", "max", "min", "avg"}

// String names the reduction.
func (o Op) String() string {
	if o < 0 || o >= numOps {
		return fmt.Sprintf("Op(%d)", int32(o))
	}
	return opNames[o]
}
