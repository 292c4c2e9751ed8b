// Tile-sweep variants of lazykern/tropical/preamble.cu: prepended to the preamble by
// benchmarks/tile_sweep.py (never by the library), they switch on code paths the library's
// kernels are built without. Each switch is off by default; pass -DLK_...=1 to try one.
//
// LK_WARP_XY (0): lay each warp out as 8 thread columns x 4 thread rows of the block's
//   thread grid (default: tid walks the columns, a warp is 16 x 2 for a 128-wide tile),
//   so a warp's B fragment loads touch 8 distinct 16-byte runs (one wavefront) instead of 16.
// LK_FRAG_PIPE (0): software-pipeline the shared-memory fragment loads: the a/b fragments of
//   step kk + 1 are loaded while step kk's products run (16 more registers for 8 x 8).
// LK_CP_ASYNC (0): float rings fill shared memory with cp.async (global -> shared, no
//   register staging; out-of-range elements are stored as the fill directly), LK_STAGES
//   (2 or 3) tiles in flight.
// LK_KUNROLL (0 = BK): k steps unrolled per K tile (round 6: a smaller loop body for the
//   instruction cache; the f32 128x128x16 body is 2,100 instructions, 34 KB).
#ifndef LK_WARP_XY
#define LK_WARP_XY 0
#endif
#ifndef LK_KUNROLL
#define LK_KUNROLL 0
#endif
#ifndef LK_FRAG_PIPE
#define LK_FRAG_PIPE 0
#endif
#ifndef LK_CP_ASYNC
#define LK_CP_ASYNC 0
#endif
#ifndef LK_STAGES
#define LK_STAGES 2
#endif

namespace lk {
// cp.async helpers of TileLoader::load_async (LK_CP_ASYNC).
__device__ __forceinline__ unsigned smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(dst)), "l"(src));
}
template <typename T> __device__ __forceinline__ void cp_async_elem(T* dst, const T* src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem_addr(dst)), "l"(src), "n"(sizeof(T)));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
}  // namespace lk
