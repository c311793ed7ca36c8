package pickle

import (
	"fmt"
	"math/big"
)

// Tuple is a Python tuple.
type Tuple []any

// Dict is a Python dict: its keys in insertion order and their values.
type Dict struct {
	Keys   []any
	Values []any
	index  map[any]int // scalar keys (strings, numbers, bools, nil) of large dicts
}

// smallDict is the size up to which a dict finds keys by scanning, without
// an index: most dicts of a snapshot have a few keys.
const smallDict = 16

func scalar(k any) bool {
	switch k.(type) {
	case nil, bool, int64, float64, string:
		return true
	}
	return false
}

// find returns the position of scalar key k, or -1.
func (d *Dict) find(k any) int {
	if d.index != nil {
		if i, ok := d.index[k]; ok {
			return i
		}
		return -1
	}
	for i, key := range d.Keys {
		if scalar(key) && key == k {
			return i
		}
	}
	return -1
}

// Get returns the value of key k (a string, int64, float64, bool or nil)
// and whether it is present.
func (d *Dict) Get(k any) (any, bool) {
	if d == nil || !scalar(k) {
		return nil, false
	}
	if i := d.find(k); i >= 0 {
		return d.Values[i], true
	}
	return nil, false
}

// Len is the number of entries.
func (d *Dict) Len() int {
	if d == nil {
		return 0
	}
	return len(d.Keys)
}

func (d *Dict) set(k, v any) error {
	switch k.(type) {
	case nil, bool, int64, float64, string:
		if i := d.find(k); i >= 0 {
			d.Values[i] = v
			return nil
		}
		if d.index != nil {
			d.index[k] = len(d.Keys)
		} else if len(d.Keys) == smallDict {
			d.index = make(map[any]int, 2*smallDict)
			for i, key := range d.Keys {
				if scalar(key) {
					if _, dup := d.index[key]; !dup {
						d.index[key] = i
					}
				}
			}
			d.index[k] = len(d.Keys)
		}
	case Tuple, *big.Int, []byte:
		// Kept in order; not indexed (Get looks up scalar keys only).
	default:
		return fmt.Errorf("unhashable dict key of type %T", k)
	}
	d.Keys = append(d.Keys, k)
	d.Values = append(d.Values, v)
	return nil
}
