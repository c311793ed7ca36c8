package asyncpool

import (
	"github.com/gpumem/gpumem"
	"github.com/gpumem/gpumem/internal/ptrmap"
)

// recTable holds a device's records by address. It is ptrmap's table
// (one probe to add or remove a record, where a Go map needs a lookup and
// a change) with the allocator's types. The device's mu guards it.
type recTable struct{ m ptrmap.Map[record] }

func (t *recTable) get(p gpumem.Ptr) (record, bool) { return t.m.Get(uint64(p)) }
func (t *recTable) has(p gpumem.Ptr) bool           { return t.m.Ref(uint64(p)) != nil }
func (t *recTable) set(p gpumem.Ptr, rec record)    { t.m.Set(uint64(p), rec) }
func (t *recTable) del(p gpumem.Ptr)                { t.m.Delete(uint64(p)) }
func (t *recTable) len() int                        { return t.m.Len() }

// add records a new address; false if p is held already (or is 0).
func (t *recTable) add(p gpumem.Ptr, rec record) bool { return t.m.Insert(uint64(p), rec) }

// take removes p's record and returns it.
func (t *recTable) take(p gpumem.Ptr) (record, bool) { return t.m.Delete(uint64(p)) }

// each calls f for every record until f returns false; f must not change
// the table.
func (t *recTable) each(f func(p gpumem.Ptr, rec record) bool) {
	t.m.Range(func(k uint64, rec record) bool { return f(gpumem.Ptr(k), rec) })
}
