/* Kernels after compilation: the cubin's facts, loading on the device, accessors. */
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "deps.h"
#include "internal.h"
#include "plan.h"

/* Clusters of this kernel that fit on the device at once, from the real block size and
 * shared memory, for the runs that size their grid by it (STEAL, STATIC): once, at load, so
 * that no run queries the driver for it. Counted with the response ring, which a run that
 * claims needs (a run that does not has no more units than clusters fit at once). The CTAs
 * per SM too: a stream on a partition of the device (an SM budget's green context) derives its
 * clusters from them (green.h: clcrt__partition_clusters), not from the device's count, which
 * includes what GPC boundaries cost the whole device. */
clcrt_status clcrt__kernel_occupancy(clcrt_runtime *rt, const clcrt_kernel *k, clcrt__occ *out) {
  int n = 0, per_sm = 0;
  size_t smem = k->smem_bytes + k->ring_bytes;
  if (k->cluster_size == 1) {
    /* 1-CTA kernels are launched without a cluster, for which the cluster query says 0. */
    CU_CHECK(rt, cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k->fn, (int)k->nthreads, smem));
    n = per_sm * rt->num_sms;
  } else {
    CUresult r = rt->cu->cuOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k->fn, (int)k->nthreads, smem);
    /* For a cluster kernel the CTAs per SM only refine partitions: without them a partition's
     * share is the device's in proportion (green.h), so a refusal here is not a failure. */
    if (r != CUDA_SUCCESS) {
      clcrt__log(rt, CLCRT_LOG_DEBUG,
                 "kernel %s: cuOccupancyMaxActiveBlocksPerMultiprocessor failed with %s: SM partitions get the "
                 "device's clusters in proportion",
                 k->name, clcrt__cu_name(rt, r));
      per_sm = 0;
    }
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = k->cluster.x * (unsigned)rt->num_sms; /* any multiple of the cluster shape */
    cfg.gridDimY = k->cluster.y;
    cfg.gridDimZ = k->cluster.z;
    cfg.blockDimX = k->block.x;
    cfg.blockDimY = k->block.y;
    cfg.blockDimZ = k->block.z;
    cfg.sharedMemBytes = (unsigned)smem;
    CU_CHECK(rt, cuOccupancyMaxActiveClusters(&n, k->fn, &cfg));
  }
  if (n <= 0)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "kernel %s: no cluster of %u CTAs x %u threads with %u bytes of dynamic shared memory fits on "
                       "this device (registers %d per thread)",
                       k->name, k->cluster_size, k->nthreads, k->smem_bytes, k->kinfo->registers);
  /* A cluster kernel's CTAs per SM are at most what its clusters fill on the whole device,
   * rounded up (the device's count loses only what GPC boundaries cost it): the H100 runs 8
   * CTAs of 2- and 4-CTA clusters per SM where 16 blocks of the same kernel fit
   * (tests/gpu_share.c's probe, 2026-11-25: with this cap the derived counts of partitions of
   * whole groups matched all 27 measured ones, without it 6 were twice too large). */
  if (k->cluster_size > 1 && per_sm > 0) {
    long long cap = ((long long)n * k->cluster_size + rt->num_sms - 1) / rt->num_sms;
    if (cap < per_sm) per_sm = (int)cap;
  }
  out->clusters = n;
  out->blocks_per_sm = per_sm > 0 ? per_sm : 0;
  /* A claiming run's guided bound divides by twice this (plan.c): once per kernel, not per run. */
  clcrt__fastdiv(2u * (uint32_t)n, &out->guide_mul, &out->guide_shr);
  return CLCRT_OK;
}

/* Loads the cubin context-independently and prepares the kernel for launches: parameter
 * layout checked against the scheduler's, attributes that depend on the description set
 * once. */
static clcrt_status load_entered(clcrt_runtime *rt, clcrt_kernel *k);
static clcrt_status load(clcrt_runtime *rt, clcrt_kernel *k) {
  clcrt__ctx_saved sv;
  clcrt_status st = clcrt__ctx_push(rt, &sv);
  if (st != CLCRT_OK) return st;
  st = load_entered(rt, k);
  clcrt__ctx_leave(rt, &sv);
  return st;
}
static clcrt_status load_entered(clcrt_runtime *rt, clcrt_kernel *k) {
  clcrt_status st;
  double t0 = clcrt__now_ms();
  CU_CHECK(rt, cuLibraryLoadData(&k->lib, k->cubin, NULL, NULL, 0, NULL, NULL, 0));
  CU_CHECK(rt, cuLibraryGetKernel(&k->kern, k->lib, k->name));
  CU_CHECK(rt, cuKernelGetFunction(&k->fn, k->kern));
  size_t off0 = 0, size0 = 0, off1 = 0, size1 = 0;
  CU_CHECK(rt, cuFuncGetParamInfo(k->fn, 0, &off0, &size0));
  CU_CHECK(rt, cuFuncGetParamInfo(k->fn, 1, &off1, &size1));
  if (size1 != sizeof(clcrt__params))
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "kernel %s: the scheduler parameter is %zu bytes on the device but %zu on the host: the "
                       "library and its embedded template disagree (rebuild clcrt)",
                       k->name, size1, sizeof(clcrt__params));
  k->args_size = size0;
  k->args_offset = off0;
  k->params_offset = off1;
  int static_smem = 0;
  CU_CHECK(rt, cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->fn));
  /* The dynamic shared memory of a launch: the tile function's, and the scheduler's
   * response ring where the run uses one (launch.c). */
  unsigned dyn = k->smem_bytes + k->ring_bytes;
  if ((long)static_smem + dyn > (long)rt->max_smem_optin)
    return clcrt__fail(rt, CLCRT_E_INVALID,
                       "kernel %s needs %u bytes of dynamic (%u of them the scheduler's response ring) plus %d of "
                       "static shared memory per CTA, but this device allows %d in all",
                       k->name, dyn, k->ring_bytes, static_smem, rt->max_smem_optin);
  if (dyn > 48 * 1024)
    CU_CHECK(rt, cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)dyn));
  if (k->cluster_size > 8) {
    CUresult r = rt->cu->cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    if (r != CUDA_SUCCESS)
      return clcrt__fail(rt, CLCRT_E_INVALID,
                         "kernel %s: a cluster of %u CTAs needs non-portable cluster sizes, which this device refuses "
                         "(%s): its limit is 8",
                         k->name, k->cluster_size, clcrt__cu_name(rt, r));
  }
  if ((k->sched == CLCRT_SCHED_STEAL || k->grid == CLCRT_GRID_PERSISTENT) &&
      (st = clcrt__kernel_occupancy(rt, k, &k->occ)) != CLCRT_OK)
    return st;
  pthread_mutex_lock(&rt->lock);
  rt->cstats.load_ms += clcrt__now_ms() - t0;
  pthread_mutex_unlock(&rt->lock);
  return CLCRT_OK;
}

clcrt_status clcrt__kernel_finish(clcrt_runtime *rt, clcrt_kernel *k) {
  char err[256];
  int r = clcrt__cubin_parse(k->cubin, k->cubin_size, &k->info, err, sizeof err);
  if (r == -2) return clcrt__fail(rt, CLCRT_E_NOMEM, "out of memory reading the cubin of %s", k->name);
  if (r != 0) return clcrt__fail(rt, CLCRT_E_CORRUPT, "the cubin of %s cannot be read: %s", k->name, err);
  for (size_t i = 0; i < k->info.num_kernels; i++)
    if (k->info.kernels[i].name && strcmp(k->info.kernels[i].name, k->name) == 0) k->kinfo = &k->info.kernels[i];
  if (!k->kinfo) return clcrt__fail(rt, CLCRT_E_CORRUPT, "the cubin has no entry named %s", k->name);
  if (rt->compile_only) {
    /* The check load() makes on a device, against the architecture's limit: a kernel that
     * compiles here must not be one the device then refuses. */
    unsigned dyn = k->smem_bytes + k->ring_bytes, limit = clcrt__arch_smem_limit(rt->sm);
    unsigned long long total = (unsigned long long)k->kinfo->static_smem + dyn;
    if (total > limit)
      return clcrt__fail(rt, CLCRT_E_INVALID,
                         "kernel %s needs %u bytes of dynamic (%u of them the scheduler's response ring) plus %llu of "
                         "static shared memory per CTA, but %s allows %u in all",
                         k->name, dyn, k->ring_bytes, (unsigned long long)k->kinfo->static_smem, rt->arch, limit);
    /* What load() asks the driver for, from the cubin's parameter records. */
    if (k->kinfo->param0_bytes > 0) k->args_size = (size_t)k->kinfo->param0_bytes;
    return CLCRT_OK;
  }
  return load(rt, k);
}

void clcrt__kernel_free(clcrt_kernel *k) {
  if (!k) return;
  if (k->lib && k->rt->cu) k->rt->cu->cuLibraryUnload(k->lib);
  clcrt__cubin_free(&k->info);
  clcrt__free(k->name);
  clcrt__free(k->cubin);
  clcrt__free(k->ptx);
  clcrt__free(k->desc);
  clcrt__deps_free(k->deps);
  clcrt__free(k);
}

clcrt_status clcrt_kernel_cubin(const clcrt_kernel *k, const void **data, size_t *size) {
  if (!k) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_kernel_cubin: the kernel is NULL");
  if (!data || !size)
    return clcrt__fail(k->rt, CLCRT_E_INVALID, "clcrt_kernel_cubin(%s): %s is NULL", k->name, !data ? "data" : "size");
  *data = k->cubin;
  *size = k->cubin_size;
  return CLCRT_OK;
}

clcrt_status clcrt_kernel_ptx(const clcrt_kernel *k, const char **ptx) {
  if (!k) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_kernel_ptx: the kernel is NULL");
  if (!ptx) return clcrt__fail(k->rt, CLCRT_E_INVALID, "clcrt_kernel_ptx(%s): ptx is NULL", k->name);
  *ptx = k->ptx;
  if (!k->ptx)
    return clcrt__fail(k->rt, CLCRT_E_NOT_FOUND,
                       "kernel %s came from the disk cache without its PTX; register it with the cache disabled to "
                       "get the PTX",
                       k->name);
  return CLCRT_OK;
}

clcrt_status clcrt_kernel_info_get(const clcrt_kernel *k, clcrt_kernel_info *info) {
  if (!k) return clcrt__fail_norts(CLCRT_E_INVALID, "clcrt_kernel_info_get: the kernel is NULL");
  if (!info) return clcrt__fail(k->rt, CLCRT_E_INVALID, "clcrt_kernel_info_get(%s): info is NULL", k->name);
  if (info->size < sizeof(size_t) || info->size > sizeof *info)
    return clcrt__fail(k->rt, CLCRT_E_INVALID,
                       "clcrt_kernel_info_get(%s): info->size is %zu (this library's clcrt_kernel_info has %zu): "
                       "initialise it with CLCRT_KERNEL_INFO_INIT",
                       k->name, info->size, sizeof *info);
  clcrt_kernel_info v;
  memset(&v, 0, sizeof v);
  v.size = info->size;
  v.name = k->name;
  v.arch = k->rt->arch;
  v.sched = k->sched;
  v.grid = k->grid == CLCRT_GRID_AUTO ? CLCRT_GRID_PERSISTENT : k->grid; /* STEAL's AUTO: persistent unless preemptible */
  v.block = k->block;
  v.cluster = k->cluster;
  v.registers = k->kinfo->registers;
  v.stack_bytes = k->kinfo->frame_bytes;
  v.static_smem = (unsigned)k->kinfo->static_smem;
  v.dynamic_smem = k->smem_bytes;
  v.param_bytes = k->args_size; /* the driver's word, or in compile-only mode the cubin's */
  v.has_clc = k->kinfo->has_clc;
  v.compile_ms = k->compile_ms;
  v.from_cache = __atomic_load_n(&k->from_cache, __ATOMIC_RELAXED);
  memcpy(info, &v, info->size);
  return CLCRT_OK;
}
