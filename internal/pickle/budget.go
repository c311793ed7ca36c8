package pickle

import "math/big"

// The budget of MaxDecoded: what the values a decoder makes are estimated
// to take in memory, charged as they are pushed.

// decodedFloor and decodedCap are DecodedFloor and MaxDecoded; tests lower
// them.
var decodedFloor, decodedCap int64 = DecodedFloor, MaxDecoded

// push puts a value the decoder has just made on the stack, charging its
// estimated size to the budget of MaxDecoded.
func (d *decoder) push(v any) error {
	n := int64(16)
	switch x := v.(type) {
	case string:
		n += int64(len(x))
	case []byte:
		n += 8 + int64(len(x))
	case *big.Int:
		n += 16 + int64(len(x.Bits()))*8
	case *list:
		n += 48 + 16*int64(len(x.v))
	case *Dict:
		n += 80 + 32*int64(x.Len())
	case Tuple:
		n += 8 + 16*int64(len(x))
	}
	return d.pushCharged(v, n)
}

// pushRef puts a value decoded before (DUP, a memo reference) on the
// stack: a slot's worth of memory.
func (d *decoder) pushRef(v any) error { return d.pushCharged(v, 16) }

func (d *decoder) pushCharged(v any, n int64) error {
	if len(d.stack) >= 1<<24 {
		return d.fail(d.off, "stack over %d values", 1<<24)
	}
	d.spent += n
	if limit := min(decodedCap, decodedFloor+DecodedPerByte*d.off); d.spent > limit {
		return d.fail(d.off, "the values decoded from %d bytes of input would take more than %d bytes of memory (at most %d a byte of input, plus %d, and %d in all)",
			d.off, limit, DecodedPerByte, decodedFloor, decodedCap)
	}
	d.stack = append(d.stack, v)
	return nil
}
