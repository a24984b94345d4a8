/* clcrt_tensor_map_2d: 2-D tensor maps for TMA through the driver's cuTensorMapEncodeTiled.
 *
 * Every rule the driver checks is checked here first with a message that names the argument
 * and the numbers, because the driver only says CUDA_ERROR_INVALID_VALUE. The choices the
 * helper makes for the caller: no interleave, element strides of 1, L2 promotion of 256
 * bytes (TMA boxes are whole rows of 64+ bytes: fetching 256 bytes per DRAM request is what
 * CUTLASS and DeepGEMM use for their operand loads), and zeros for elements outside the
 * tensor (so a box hanging over the edge of a matrix adds nothing to a product). */
#include <string.h>

#include "checks.h"
#include "internal.h"

static unsigned dtype_bytes(clcrt_dtype t) {
  switch (t) {
    case CLCRT_DTYPE_BF16:
    case CLCRT_DTYPE_F16:
      return 2;
    case CLCRT_DTYPE_F32:
      return 4;
    case CLCRT_DTYPE_U8:
      return 1;
  }
  return 0;
}

static const char *dtype_name(clcrt_dtype t) {
  switch (t) {
    case CLCRT_DTYPE_BF16:
      return "bf16";
    case CLCRT_DTYPE_F16:
      return "f16";
    case CLCRT_DTYPE_F32:
      return "f32";
    case CLCRT_DTYPE_U8:
      return "u8";
  }
  return "?";
}

clcrt_status clcrt_tensor_map_2d(clcrt_runtime *rt, clcrt_tensor_map *out, clcrt_dtype dtype, unsigned long long base,
                                 uint64_t rows, uint64_t cols, uint64_t row_stride_bytes, uint32_t box_rows,
                                 uint32_t box_cols, clcrt_swizzle swizzle) {
  return clcrt_tensor_map_2d_l2(rt, out, dtype, base, rows, cols, row_stride_bytes, box_rows, box_cols, swizzle,
                                CLCRT_L2_PROMOTION_256B);
}

clcrt_status clcrt_tensor_map_2d_l2(clcrt_runtime *rt, clcrt_tensor_map *out, clcrt_dtype dtype,
                                    unsigned long long base, uint64_t rows, uint64_t cols, uint64_t row_stride_bytes,
                                    uint32_t box_rows, uint32_t box_cols, clcrt_swizzle swizzle,
                                    clcrt_l2_promotion promotion) {
  if (!rt) return clcrt__fail(NULL, CLCRT_E_INVALID, "clcrt_tensor_map_2d: rt is NULL");
  if (!out) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_tensor_map_2d: out is NULL");
  unsigned es = (unsigned)dtype < 4 ? dtype_bytes(dtype) : 0;
  if (!es)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_tensor_map_2d: dtype %d is not a clcrt_dtype (CLCRT_DTYPE_BF16, _F16, _F32 or _U8)",
                       (int)dtype);
  if ((unsigned)swizzle > CLCRT_SWIZZLE_128B)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_tensor_map_2d: swizzle %d is not a clcrt_swizzle (CLCRT_SWIZZLE_NONE, _32B, _64B or "
                       "_128B)",
                       (int)swizzle);
  if ((unsigned)promotion > CLCRT_L2_PROMOTION_128B)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_tensor_map_2d: L2 promotion %d is not a clcrt_l2_promotion (CLCRT_L2_PROMOTION_256B, "
                       "_NONE, _64B or _128B)",
                       (int)promotion);
  if (base == 0) return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_tensor_map_2d: base is 0 (a device address is needed)");
  if (base % 16)
    return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_tensor_map_2d: base 0x%llx is not 16-byte aligned (TMA needs it)",
                       base);
  if (rows == 0 || rows >= (1ull << 32) || cols == 0 || cols >= (1ull << 32))
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_tensor_map_2d: %llu rows x %llu cols: each must be at least 1 and less than 2^32",
                       (unsigned long long)rows, (unsigned long long)cols);
  if (row_stride_bytes % 16 || row_stride_bytes >= (1ull << 40))
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_tensor_map_2d: row_stride_bytes %llu must be a multiple of 16 and less than 2^40 (for "
                       "%s, a row of a multiple of %u elements)",
                       (unsigned long long)row_stride_bytes, dtype_name(dtype), 16 / es);
  if (row_stride_bytes < cols * es)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_tensor_map_2d: row_stride_bytes %llu is less than a row (%llu %s elements = %llu bytes)",
                       (unsigned long long)row_stride_bytes, (unsigned long long)cols, dtype_name(dtype),
                       (unsigned long long)(cols * es));
  if (box_rows == 0 || box_rows > 256 || box_cols == 0 || box_cols > 256)
    return clcrt__fail(rt, CLCRT_E_INVALID, "clcrt_tensor_map_2d: box %u rows x %u cols: each must be 1..256",
                       box_rows, box_cols);
  unsigned inner = box_cols * es;
  if (inner % 16)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_tensor_map_2d: a box row is %u bytes (%u %s elements): TMA moves whole 16-byte units, so "
                       "box_cols must be a multiple of %u",
                       inner, box_cols, dtype_name(dtype), 16 / es);
  static const unsigned span[] = {0, 32, 64, 128};
  if (swizzle != CLCRT_SWIZZLE_NONE && inner > span[swizzle])
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "clcrt_tensor_map_2d: a box row is %u bytes (%u %s elements), more than the %u-byte swizzle "
                       "span: at most %u columns",
                       inner, box_cols, dtype_name(dtype), span[swizzle], span[swizzle] / es);
  if (rt->compile_only)
    return clcrt__fail(rt, CLCRT_E_UNSUPPORTED,
                       "clcrt_tensor_map_2d: runtime for %s is compile-only: encoding a tensor map needs the driver",
                       rt->arch);

  static const CUtensorMapDataType cu_dtype[] = {CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                                                 CU_TENSOR_MAP_DATA_TYPE_FLOAT32, CU_TENSOR_MAP_DATA_TYPE_UINT8};
  static const CUtensorMapSwizzle cu_swizzle[] = {CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_SWIZZLE_32B,
                                                  CU_TENSOR_MAP_SWIZZLE_64B, CU_TENSOR_MAP_SWIZZLE_128B};
  static const CUtensorMapL2promotion cu_promotion[] = {
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B};
  _Static_assert(sizeof(CUtensorMap) == sizeof(clcrt_tensor_map), "clcrt_tensor_map mirrors CUtensorMap");
  _Static_assert(_Alignof(clcrt_tensor_map) >= 64, "TMA needs 64-byte aligned tensor maps");
  cuuint64_t dims[2] = {cols, rows};
  cuuint64_t strides[1] = {row_stride_bytes};
  cuuint32_t box[2] = {box_cols, box_rows};
  cuuint32_t estr[2] = {1, 1};
  CUtensorMap map;
  memset(&map, 0, sizeof map);
  CUresult r = rt->cu->cuTensorMapEncodeTiled(&map, cu_dtype[dtype], 2, (void *)(uintptr_t)base, dims, strides, box,
                                              estr, CU_TENSOR_MAP_INTERLEAVE_NONE, cu_swizzle[swizzle],
                                              cu_promotion[promotion], CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    return clcrt__fail(rt, CLCRT_E_CUDA,
                       "cuTensorMapEncodeTiled failed with %s: %s, %llu rows x %llu cols, row stride %llu bytes, box "
                       "%u x %u, swizzle %d, base 0x%llx",
                       clcrt__cu_name(rt, r), dtype_name(dtype), (unsigned long long)rows, (unsigned long long)cols,
                       (unsigned long long)row_stride_bytes, box_rows, box_cols, (int)swizzle, base);
  memcpy(out, &map, sizeof map);
  return CLCRT_OK;
}
