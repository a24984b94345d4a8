// clcrt tile maps: tile index -> problem coordinates, apart from the scheduler loop.
//
// The scheduler (clcrt.cuh) hands a tile function a tile of the tile grid given to clcrt_run
// (Tile.linear, Tile.unit, Tile.cta_rank); in which order the problem's tiles are visited is
// the map's business. GEMM-style loops want two maps:
//
// 1. A swizzled raster over an (m, n) grid of tiles, for L2 reuse (CUTLASS's sm90 tile
//    scheduler calls this raster order with swizzle; Triton calls it grouped ordering).
//    Raster along N with swizzle S: the m-tiles are cut into bands of S consecutive tiles
//    (the last band may be shorter); bands are visited in order of m; inside a band the
//    index walks down the band's short column of m-tiles, then steps to the next n. So the
//    tiles that run at the same time (consecutive indices) share S rows of A and a narrow
//    stretch of B, and both stay in L2. Raster along M swaps the roles. Exact: every index
//    in [0, tm*tn) maps to a distinct tile, nothing is padded.
//
//        tm = 5, tn = 4, S = 2, along N:     n=0  n=1  n=2  n=3
//                                      m=0    0    2    4    6
//                                      m=1    1    3    5    7
//                                      m=2    8   10   12   14
//                                      m=3    9   11   13   15
//                                      m=4   16   17   18   19
//
//    With clusters, the map runs over units (cluster-shaped blocks of cm x cn tiles, the
//    clcrt work unit, Tile.unit) and each CTA adds its own place in the cluster
//    (Tile.cta_rank: m fastest). Tiles past the edge of an odd grid come back with
//    `inside` false: such a CTA has no output but may still have to load its cluster's
//    shared operand.
//
// 2. A grouped (ragged) map for grouped GEMMs (mixture-of-experts layers): G problems that
//    share N and K, group g with M_g rows (0 allowed) stored one after another in one
//    token buffer. Group g has um_g x un units (um_g = ceil(ceil(M_g / BM) / cm)); the
//    map's index space is the groups' units one group after another (a cluster never
//    straddles two groups), each group in the swizzled raster above. The prefix sums of
//    units and rows are made on the device from the group sizes in device memory (routing
//    happens on the GPU; no host round trip): every thread of the CTA calls
//    clcrt::grouped_map_build once (the per-CTA prologue is the place), which writes them
//    into shared memory; clcrt::grouped_map_find then maps a unit by binary search.
//    The host launches an upper bound of units (it does not know the sizes): units at or
//    past the total come back as `valid` false and the tile function returns at once.
//    Upper bound for T rows in total: ceil(tm/cm) summed over groups <=
//    floor((T + G*(cm*BM - 1)) / (cm*BM)) unit rows, times un (clcrt_tm_group_units_bound).
//    The masked layout (DeepGEMM's, for decode under CUDA graphs): group g's rows start at
//    g * row_stride instead (a fixed maximum per group, counts clamped to it), so the launch
//    G * ceil(ceil(row_stride / BM) / cm) * un units (clcrt_tm_group_units(row_stride, ...)
//    times G) is the same for every routing and a captured graph replays with new counts.
//
// The portable core (clcrt_tm_*) is plain C as well as CUDA C++, so that the CPU tests
// check it against a brute-force reference on the host; the device helpers in namespace
// clcrt are CUDA only. Self-contained on purpose: no toolkit headers (they cost NVRTC time).
//
// Example (a tile function over a 2-D tile grid of tm x tn tiles, launched as a 1-D grid of
// tm * tn tiles; see examples/gemm/gemm.cu for the full GEMM):
//
//   #include "clcrt_tilemap.cuh"
//   struct Args { unsigned tm, tn; ... };
//   __device__ void tile(const clcrt::Tile &t, const Args &a) {
//     clcrt::TileMap2D map(a.tm, a.tn, 8, true);   // swizzle 8, raster along N
//     clcrt::TileCoord c = map.get(t.unit, t.cta_rank);
//     if (!c.inside) return;
//     ... c.m, c.n ...
//   }
#ifndef CLCRT_TILEMAP_CUH
#define CLCRT_TILEMAP_CUH

#if defined(__CUDACC__)
#define CLCRT_TM_FN __host__ __device__ __forceinline__
#else
#define CLCRT_TM_FN static inline
#endif

// ---- portable core ----------------------------------------------------------------------

// The tile (m, n) at index t in [0, tm*tn) of the swizzled raster (see above). swizzle 0 is
// taken as 1 (plain raster); along_n 0 rasters along M.
CLCRT_TM_FN void clcrt_tm_swizzle(unsigned t, unsigned tm, unsigned tn, unsigned swizzle, int along_n, unsigned *m,
                                  unsigned *n) {
  unsigned s = swizzle ? swizzle : 1u;
  unsigned major = along_n ? tm : tn;   // the dimension cut into bands
  unsigned minor = along_n ? tn : tm;   // the dimension a band runs along
  unsigned band = t / (s * minor);
  unsigned within = t - band * (s * minor);
  unsigned b0 = band * s;
  unsigned h = major - b0 < s ? major - b0 : s;  // the last band may be shorter
  unsigned along = within / h;
  unsigned across = b0 + (within - along * h);
  if (along_n) {
    *m = across;
    *n = along;
  } else {
    *m = along;
    *n = across;
  }
}

// ceil(a / b) for b > 0.
CLCRT_TM_FN unsigned clcrt_tm_cdiv(unsigned a, unsigned b) { return (a + b - 1u) / b; }

// The group of unit u: the largest g < groups with start[g] <= u, where start[0..groups] are
// the exclusive prefix sums of units per group (start[groups] = total). Empty groups
// (start[g] == start[g+1]) are never the answer: the search lands on the last of a run of
// equal starts, which is the group that owns u. u must be < start[groups].
CLCRT_TM_FN unsigned clcrt_tm_group_find(const unsigned *start, unsigned groups, unsigned u) {
  unsigned lo = 0, hi = groups;  // invariant: start[lo] <= u < start[hi]
  while (hi - lo > 1u) {
    unsigned mid = (lo + hi) >> 1;
    if (start[mid] <= u)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

// Units of one group: ceil(ceil(rows / bm) / cm) x un.
CLCRT_TM_FN unsigned clcrt_tm_group_units(unsigned rows, unsigned bm, unsigned cm, unsigned un) {
  return clcrt_tm_cdiv(clcrt_tm_cdiv(rows, bm), cm) * un;
}

// An upper bound of the units of a grouped problem whose groups hold `total_rows` rows in
// all: what the host launches when the sizes live on the device.
CLCRT_TM_FN unsigned long long clcrt_tm_group_units_bound(unsigned long long total_rows, unsigned groups, unsigned bm,
                                                         unsigned cm, unsigned un) {
  unsigned long long rows_per_unit = (unsigned long long)bm * cm;
  // sum_g ceil(M_g / R) <= sum_g (M_g + R - 1) / R, and a sum of floors is at most the floor of
  // the sum: every group wastes at most R - 1 rows.
  unsigned long long unit_rows = (total_rows + (unsigned long long)groups * (rows_per_unit - 1u)) / rows_per_unit;
  return unit_rows * un;
}

#if defined(__CUDACC__)
namespace clcrt {

// A tile of the problem: its m and n tile coordinates, and whether it is inside the grid.
struct TileCoord {
  unsigned m, n;
  bool inside;
};

// The swizzled raster over tm x tn tiles, with units of cm x cn tiles (the kernel's cluster
// shape along m and n; 1 x 1 without clusters).
struct TileMap2D {
  unsigned tm, tn, swizzle, cm, cn;
  bool along_n;
  __device__ __forceinline__ TileMap2D(unsigned tm_, unsigned tn_, unsigned swizzle_, bool along_n_,
                                       unsigned cm_ = 1, unsigned cn_ = 1)
      : tm(tm_), tn(tn_), swizzle(swizzle_), cm(cm_), cn(cn_), along_n(along_n_) {}
  // Units in the map: launch this many units (tiles = units * cm * cn).
  __device__ __forceinline__ unsigned units() const { return clcrt_tm_cdiv(tm, cm) * clcrt_tm_cdiv(tn, cn); }
  // The tile of CTA `rank` (m fastest inside the cluster) of unit u.
  __device__ __forceinline__ TileCoord get(unsigned u, unsigned rank = 0) const {
    unsigned um, un;
    if (cm == 1 && cn == 1) {
      clcrt_tm_swizzle(u, tm, tn, swizzle, along_n, &um, &un);
      return TileCoord{um, un, u < tm * tn};
    }
    clcrt_tm_swizzle(u, clcrt_tm_cdiv(tm, cm), clcrt_tm_cdiv(tn, cn), swizzle, along_n, &um, &un);
    TileCoord c;
    c.m = um * cm + rank % cm;
    c.n = un * cn + rank / cm;
    c.inside = c.m < tm && c.n < tn;
    return c;
  }
};

// A grouped problem's prefix sums in shared memory, made by grouped_map_build:
//   unit_start[0..groups]  exclusive prefix sums of the units per group;
//   row_start[0..groups]   exclusive prefix sums of the rows (the group's first row in the
//                          token buffer).
// 2 * (groups + 1) words of shared memory (grouped_map_smem_bytes).
struct GroupedMap {
  const unsigned *unit_start, *row_start;
  unsigned groups, bm, cm, un, swizzle;
  bool along_n;
  unsigned row_stride;  // masked layout: group g's first row is g * row_stride; 0: row_start[g]
};

// The shared memory a grouped map of `groups` groups takes.
__host__ __device__ constexpr unsigned grouped_map_smem_bytes(unsigned groups) { return 8u * (groups + 1u); }

// Builds the prefix sums of `groups` groups whose row counts are sizes[0..groups) (device
// memory) into `smem` (grouped_map_smem_bytes(groups), 8-byte aligned). The counts are never
// trusted: a negative count is taken as 0, a count above row_cap as row_cap when row_cap is
// not 0 (the masked layout), and with total_cap not 0 (groups one after another in a buffer
// of total_cap rows) the groups are cut where the buffer ends, so that no tile reaches past
// it whatever the counts say. When misuse is not null and the counts did not fit (a negative
// one, or more rows than total_cap), misuse[1] gets the rows they add up to (at most
// 2^32 - 1) and misuse[0] the reasons (CLCRT_TM_MISUSE_*), for the host to report.
// Every thread of the CTA must call it (it synchronises the CTA): the per-CTA prologue is the
// place. Each thread sums a contiguous chunk; a warp scan and a scan of the warp totals give
// each chunk its offset. Two scans: the first sums the rows in 64 bits (hostile counts cannot
// wrap), the second the clamped rows and the units, as one 64-bit word (units low, rows high:
// both then fit in 32 bits, the units within the host's launch bound).
#define CLCRT_TM_MISUSE_ROWS 1u
#define CLCRT_TM_MISUSE_NEGATIVE 2u
__device__ __forceinline__ unsigned grouped_rows_(int r, unsigned cap) {
  unsigned rows = r > 0 ? (unsigned)r : 0u;
  return cap && rows > cap ? cap : rows;
}

// The exclusive prefix of v over the CTA's threads (in thread order) and, in *total, the sum
// of all; synchronises the CTA twice, so warp_sums may be reused right after.
__device__ __forceinline__ unsigned long long block_scan_(unsigned long long v, unsigned long long *warp_sums,
                                                          unsigned long long *total) {
  const unsigned nthreads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned lane = tid & 31u, warp = tid >> 5, nwarps = (nthreads + 31u) >> 5;
  // Inclusive scan over the warp (a partial last warp has fewer lanes: shuffle within them).
  const unsigned live = nthreads - warp * 32u < 32u ? nthreads - warp * 32u : 32u;
  const unsigned mask = live == 32u ? 0xffffffffu : (1u << live) - 1u;
  unsigned long long inc = v;
  for (unsigned d = 1; d < 32u; d <<= 1) {
    unsigned long long x = __shfl_up_sync(mask, inc, d);
    if (lane >= d) inc += x;
  }
  if (lane == live - 1u) warp_sums[warp] = inc;
  __syncthreads();
  unsigned long long before = 0, all = 0;
  for (unsigned w = 0; w < nwarps; w++) {
    if (w < warp) before += warp_sums[w];
    all += warp_sums[w];
  }
  __syncthreads();
  *total = all;
  return before + inc - v;
}

__device__ __noinline__ void grouped_map_build_(const int *sizes, unsigned groups, unsigned bm, unsigned cm,
                                                 unsigned un, unsigned row_cap, unsigned total_cap, unsigned *misuse,
                                                 unsigned *smem) {
  __shared__ unsigned long long warp_sums[32];
  const unsigned nthreads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned per = (groups + nthreads - 1u) / nthreads;
  const unsigned g0 = tid * per < groups ? tid * per : groups;
  const unsigned g1 = g0 + per < groups ? g0 + per : groups;
  const unsigned long long cap = total_cap ? total_cap : ~0ull;
  // Pass 1: the rows as the counts give them.
  unsigned long long raw = 0;
  int negative = 0;
  for (unsigned g = g0; g < g1; g++) {
    negative |= sizes[g] < 0;
    raw += grouped_rows_(sizes[g], row_cap);
  }
  unsigned long long raw_total = 0;
  const unsigned long long raw_before = block_scan_(raw, warp_sums, &raw_total);
  negative = __syncthreads_or(negative);
  // Pass 2: each group's rows cut at the buffer's end, and their units.
  unsigned long long sum = 0, p = raw_before;
  for (unsigned g = g0; g < g1; g++) {
    const unsigned long long r = grouped_rows_(sizes[g], row_cap);
    const unsigned rows = (unsigned)((p + r < cap ? p + r : cap) - (p < cap ? p : cap));
    sum += ((unsigned long long)rows << 32) | clcrt_tm_group_units(rows, bm, cm, un);
    p += r;
  }
  unsigned long long total = 0;
  unsigned long long run = block_scan_(sum, warp_sums, &total);
  p = raw_before;
  for (unsigned g = g0; g < g1; g++) {
    smem[g] = (unsigned)run;
    smem[groups + 1u + g] = (unsigned)(run >> 32);
    const unsigned long long r = grouped_rows_(sizes[g], row_cap);
    const unsigned rows = (unsigned)((p + r < cap ? p + r : cap) - (p < cap ? p : cap));
    run += ((unsigned long long)rows << 32) | clcrt_tm_group_units(rows, bm, cm, un);
    p += r;
  }
  if (tid == nthreads - 1u) {  // the last thread's chunk ends the sums
    smem[groups] = (unsigned)total;
    smem[2u * groups + 1u] = (unsigned)(total >> 32);
    const unsigned why = (raw_total > cap ? CLCRT_TM_MISUSE_ROWS : 0u) | (negative ? CLCRT_TM_MISUSE_NEGATIVE : 0u);
    if (why && misuse) {
      // Plain stores, not atomics: misuse may be mapped host memory, and every CTA writes the
      // same two words.
      ((volatile unsigned *)misuse)[1] = raw_total < 0xffffffffull ? (unsigned)raw_total : 0xffffffffu;
      ((volatile unsigned *)misuse)[0] = why;
    }
  }
  __syncthreads();
}

// row_stride: 0 for groups one after another; the masked layout's rows per group otherwise.
// total_cap, misuse: see grouped_map_build_ (0 and null: no buffer bound, nothing reported).
__device__ __forceinline__ GroupedMap grouped_map_build(const int *sizes, unsigned groups, unsigned bm, unsigned un,
                                                        unsigned swizzle, bool along_n, void *smem, unsigned cm = 1,
                                                        unsigned row_stride = 0, unsigned total_cap = 0,
                                                        unsigned *misuse = nullptr) {
  unsigned *w = (unsigned *)smem;
  grouped_map_build_(sizes, groups, bm, cm, un, row_stride, total_cap, misuse, w);
  return GroupedMap{w, w + groups + 1u, groups, bm, cm, un, swizzle, along_n, row_stride};
}

// A unit of a grouped problem as a tile: its group, m and n tile in the group, the group's
// first row and row count. valid is false for units at or past the total (the launch's
// upper bound); inside is false for the second CTA of a cluster past an odd group's edge.
struct GroupTile {
  unsigned group, m, n, row0, rows;
  bool valid, inside;
};

__device__ __forceinline__ GroupTile grouped_map_find(const GroupedMap &g, unsigned u, unsigned rank = 0) {
  GroupTile t;
  t.valid = u < g.unit_start[g.groups];
  if (!t.valid) {
    t.group = t.m = t.n = t.row0 = t.rows = 0;
    t.inside = false;
    return t;
  }
  t.group = clcrt_tm_group_find(g.unit_start, g.groups, u);
  t.rows = g.row_start[t.group + 1u] - g.row_start[t.group];
  t.row0 = g.row_stride ? t.group * g.row_stride : g.row_start[t.group];
  const unsigned tm = clcrt_tm_cdiv(t.rows, g.bm);
  TileMap2D map(tm, g.un, g.swizzle, g.along_n, g.cm, 1);
  TileCoord c = map.get(u - g.unit_start[t.group], rank);
  t.m = c.m;
  t.n = c.n;
  t.inside = c.inside;
  return t;
}

}  // namespace clcrt
#endif  // __CUDACC__
#endif  // CLCRT_TILEMAP_CUH
