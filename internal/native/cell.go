package native

import (
	"sync"
	"unsafe"
)

// cell is scratch memory for out-parameters and small structs passed by
// pointer. Cells come from the heap (which does not move) through a pool.
type cell [16]uint64

var cells = sync.Pool{New: func() any { return new(cell) }}

func getCell() *cell {
	c := cells.Get().(*cell)
	*c = cell{}
	return c
}

func putCell(c *cell) { cells.Put(c) }

func (c *cell) addr(i int) uintptr { return uintptr(unsafe.Pointer(&c[i])) }

func (c *cell) bytes() *[128]byte { return (*[128]byte)(unsafe.Pointer(c)) }

func (c *cell) i32(i int) int32 { return *(*int32)(unsafe.Pointer(&c[i])) }
