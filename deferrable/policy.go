package deferrable

import "sort"

// Candidate is a buffer that a policy may choose to spill: resident in the tier
// being relieved, not locked and not moving.
type Candidate struct {
	Buffer   *Buffer // the buffer itself, to return among the victims
	Info             // ID, Size, Priority, Tier
	LastUsed uint64  // logical time of its last release (or allocation); smaller is older
}

// Policy chooses which buffers to spill. Victims is called with the manager's
// lock held: it must not call the manager or block. It returns the candidates
// to spill, in order, until about need bytes are freed; buffers it returns that
// were not among the candidates are ignored.
type Policy interface {
	Victims(cands []Candidate, need uint64) []Candidate
}

// LRU is the default policy: the lowest priority first, then the least
// recently released, then the oldest buffer; it takes victims until their sizes
// add up to need.
type LRU struct{}

// Victims implements Policy.
func (LRU) Victims(cands []Candidate, need uint64) []Candidate {
	if need == 0 || len(cands) == 0 {
		return nil
	}
	sorted := append([]Candidate(nil), cands...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		if a.LastUsed != b.LastUsed {
			return a.LastUsed < b.LastUsed
		}
		return a.ID < b.ID
	})
	var sum uint64
	for i, c := range sorted {
		sum += c.Size
		if sum >= need {
			return sorted[:i+1]
		}
	}
	return sorted
}
