// Package sim is a simulated GPU in pure Go that implements gpumem.Backend,
// so that allocators and programs can be tested on machines with no GPU.
//
// It is work in progress toward the full description in this file; see the
// method documentation for what each operation models.
package sim
