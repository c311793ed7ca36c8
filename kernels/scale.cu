// scale<T>: x[i] *= a over n elements of type T. A template: instantiate it
// by name expression ("scale<float>", "scale<double>") and launch the
// lowered (mangled) name the compiler gives back. Written in gpumem's common
// dialect.
template <typename T>
__global__ void scale(T* GPUMEM_RESTRICT x, T a, GPUMEM_SIZE_T n)
{
    GPUMEM_SIZE_T i = (GPUMEM_SIZE_T)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        x[i] *= a;
    }
}
