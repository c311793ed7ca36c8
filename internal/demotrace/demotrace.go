// Package demotrace generates the project's synthetic demo trace: the
// allocation requests of a small transformer's training loop, made up from a
// model of what such a loop asks for (not recorded from a real program).
//
// The model: a GPT-like network of Layers blocks, Width wide, trained for
// Steps steps with AdamW and mixed precision; each step draws a batch's
// sequence length at random (so activation sizes change from step to step,
// which is what fragments a caching allocator), a side stream (1) prepares
// the inputs that the main stream (0) consumes and frees, the forward pass
// keeps activations for the backward pass, which frees them in reverse and
// makes gradients, and the optimizer makes and drops temporaries.
package demotrace

import (
	"math/rand/v2"

	"github.com/gpumem/gpumem/trace"
)

// Params shape the generated trace.
type Params struct {
	Seed   uint64
	Layers int
	Width  int // model width
	Vocab  int
	Batch  int
	MinSeq int
	MaxSeq int
	Steps  int
}

// Default are the parameters of the bundled demo trace.
var Default = Params{Seed: 20261122, Layers: 8, Width: 1024, Vocab: 50304, Batch: 8, MinSeq: 64, MaxSeq: 1024, Steps: 12}

type gen struct {
	tr   *trace.Trace
	next uint64
}

func (g *gen) alloc(size uint64, stream int) uint64 {
	g.next++
	g.tr.Events = append(g.tr.Events, trace.Event{Alloc: true, ID: g.next, Size: size, Stream: stream})
	return g.next
}

func (g *gen) free(id uint64, stream int) {
	g.tr.Events = append(g.tr.Events, trace.Event{ID: id, Stream: stream})
}

// Generate makes the trace; the same Params give the same trace.
func Generate(p Params) *trace.Trace {
	r := rand.New(rand.NewPCG(p.Seed, p.Seed^0x9e3779b97f4a7c15))
	g := &gen{tr: &trace.Trace{Name: "demo"}}
	w := uint64(p.Width)
	const fp32, bf16 = 4, 2

	// Parameters (fp32), their AdamW moments, live for the whole run.
	var paramSizes []uint64
	paramSizes = append(paramSizes, uint64(p.Vocab)*w*fp32, 1024*w*fp32) // token and position embeddings
	for l := 0; l < p.Layers; l++ {
		paramSizes = append(paramSizes,
			w*fp32, w*fp32, // layer norm
			w*3*w*fp32, 3*w*fp32, // attention in-projection
			w*w*fp32, w*fp32, // attention out-projection
			w*fp32, w*fp32, // layer norm
			w*4*w*fp32, 4*w*fp32, // MLP up
			4*w*w*fp32, w*fp32, // MLP down
		)
	}
	for _, s := range paramSizes {
		g.alloc(s, 0)
	}
	var moments []uint64
	grads := make([]uint64, len(paramSizes))

	for step := 0; step < p.Steps; step++ {
		seq := uint64(p.MinSeq + r.IntN(p.MaxSeq-p.MinSeq+1))
		tokens := uint64(p.Batch) * seq
		// The side stream copies the batch in; the main stream frees it.
		in := g.alloc(tokens*8, 1)
		tgt := g.alloc(tokens*8, 1)

		// Forward: bf16 copies of the weights and saved activations.
		var saved []uint64
		act := func(size uint64) { saved = append(saved, g.alloc(size, 0)) }
		act(tokens * w * bf16) // embeddings
		for l := 0; l < p.Layers; l++ {
			wcast := g.alloc(w*3*w*bf16, 0)
			act(tokens * w * bf16)     // ln out
			act(tokens * 3 * w * bf16) // qkv
			heads := uint64(p.Width / 64)
			scores := g.alloc(uint64(p.Batch)*heads*seq*seq*bf16, 0) // attention scores, transient
			act(uint64(p.Batch) * heads * seq * 4)                   // softmax stats (fp32 logsumexp)
			g.free(scores, 0)
			act(tokens * w * bf16) // attention out
			g.free(wcast, 0)
			act(tokens * w * bf16)     // residual
			act(tokens * 4 * w * bf16) // MLP hidden
			act(tokens * 4 * w * bf16) // gelu
			act(tokens * w * bf16)     // MLP out
		}
		logits := g.alloc(tokens*uint64(p.Vocab)*bf16, 0)
		lossTmp := g.alloc(tokens*uint64(p.Vocab)*fp32, 0) // fp32 upcast for the loss
		loss := g.alloc(4, 0)
		g.free(lossTmp, 0)
		g.free(in, 0)

		// Backward: gradients made as activations are freed in reverse.
		dlogits := g.alloc(tokens*uint64(p.Vocab)*bf16, 0)
		g.free(logits, 0)
		g.free(tgt, 0)
		gi := len(paramSizes) - 1
		for len(saved) > 0 {
			last := saved[len(saved)-1]
			saved = saved[:len(saved)-1]
			tmp := g.alloc(tokens*w*bf16*uint64(1+r.IntN(4)), 0)
			if gi >= 0 && grads[gi] == 0 && r.IntN(3) > 0 {
				grads[gi] = g.alloc(paramSizes[gi], 0)
				gi--
			}
			g.free(tmp, 0)
			g.free(last, 0)
		}
		for ; gi >= 0; gi-- {
			if grads[gi] == 0 {
				grads[gi] = g.alloc(paramSizes[gi], 0)
			}
		}
		g.free(dlogits, 0)
		g.free(loss, 0)

		// Optimizer: moments made on the first step, then kept; a
		// temporary per parameter; gradients freed (set_to_none).
		if moments == nil {
			for _, s := range paramSizes {
				moments = append(moments, g.alloc(s, 0), g.alloc(s, 0))
			}
		}
		for i, s := range paramSizes {
			t := g.alloc(s, 0)
			g.free(t, 0)
			g.free(grads[i], 0)
			grads[i] = 0
		}
	}
	return g.tr
}
