// reduce_sum: *out += the sum of n float32 elements. Launch with
// REDUCE_THREADS threads per block and any number of blocks (a grid-stride
// loop); *out must be zeroed first. Each block sums into shared memory down
// to one warp (wavefront), which finishes with shuffles; lane 0 adds the
// block's sum atomically. Written in gpumem's common dialect: the warp size
// is 32 on NVIDIA and 64 on CDNA, read at run time on HIP.
#define REDUCE_THREADS 256

extern "C" __global__ void GPUMEM_LAUNCH_BOUNDS(REDUCE_THREADS)
reduce_sum(const float* GPUMEM_RESTRICT in, float* GPUMEM_RESTRICT out, GPUMEM_SIZE_T n)
{
    __shared__ float partial[REDUCE_THREADS];
    const unsigned t = threadIdx.x;
    const unsigned warp = GPUMEM_WARP_SIZE;
    float s = 0.0f;
    for (GPUMEM_SIZE_T i = (GPUMEM_SIZE_T)blockIdx.x * blockDim.x + t; i < n;
         i += (GPUMEM_SIZE_T)gridDim.x * blockDim.x) {
        s += in[i];
    }
    partial[t] = s;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride >= warp; stride /= 2) {
        if (t < stride) {
            partial[t] += partial[t + stride];
        }
        __syncthreads();
    }
    if (t < warp) {
        float v = partial[t];
        for (unsigned offset = warp / 2; offset > 0; offset /= 2) {
            v += GPUMEM_SHFL_DOWN(GPUMEM_FULL_MASK, v, offset);
        }
        if (t == 0) {
            GPUMEM_ATOMIC_ADD(out, v);
        }
    }
}
