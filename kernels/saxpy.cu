// saxpy: y = a*x + y over n float32 elements, one element per thread.
// Written in gpumem's common dialect (docs/kernels.md): it compiles with
// NVRTC and with hipRTC.
extern "C" __global__ void saxpy(float a, const float* GPUMEM_RESTRICT x, float* GPUMEM_RESTRICT y, GPUMEM_SIZE_T n)
{
    GPUMEM_SIZE_T i = (GPUMEM_SIZE_T)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
