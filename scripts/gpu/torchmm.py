#!/usr/bin/env python3
"""torch.mm on the same scheme as tests/gpu_blas_test.go (TestGPUBLASThroughputCUDA):
n x n x n float32 and float64 products into a preallocated output, TF32 off,
3 warm-up calls, then 5 repetitions of 20 calls between two CUDA events on
the current stream; prints the median as
    TORCH sgemm 4096 TFLOPS=... ms=...
"""
import statistics
import sys

import torch

n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
iters, reps = 20, 5
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
for dtype, name in ((torch.float32, "sgemm"), (torch.float64, "dgemm")):
    a = torch.rand(n, n, device="cuda", dtype=dtype) * 2 - 1
    b = torch.rand(n, n, device="cuda", dtype=dtype) * 2 - 1
    c = torch.empty(n, n, device="cuda", dtype=dtype)
    for _ in range(3):
        torch.mm(a, b, out=c)
    torch.cuda.synchronize()
    tflops, ms = [], []
    for _ in range(reps):
        e0 = torch.cuda.Event(enable_timing=True)
        e1 = torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(iters):
            torch.mm(a, b, out=c)
        e1.record()
        e1.synchronize()
        per = e0.elapsed_time(e1) / iters
        ms.append(per)
        tflops.append(2 * n**3 / (per * 1e-3) / 1e12)
    print(f"TORCH {name} {n} TFLOPS={statistics.median(tflops):.2f} ms={statistics.median(ms):.3f} torch={torch.__version__}", flush=True)
