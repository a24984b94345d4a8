/* Section "overhead": host cost of clcrt_run against a bare cuLaunchKernelEx. */
#include <string.h>

#include "bench.h"

extern const char *k_scale_src;

/* Host cost per call: clcrt_run against a bare cuLaunchKernelEx of the same CUfunction
 * with the same configuration, each timed on the CPU over batches of 200 calls (a 1-tile
 * FIXED kernel, synchronised between batches so the launch queue never fills). */
void bench_overhead(void) {
  clcrt_kernel *k = reg2(k_scale_src, "scale_tile", "ScaleArgs", CLCRT_SCHED_STEAL, CLCRT_GRID_PERSISTENT, 1, "-DPER=1", NULL);
  CUdeviceptr x, y;
  CK(cu->cuMemAlloc(&x, 4096));
  CK(cu->cuMemAlloc(&y, 4096));
  struct {
    CUdeviceptr x, y;
    unsigned long long n4;
    float a;
  } args = {x, y, 256, 2.0f};
  /* The parameters of the same 1-tile STEAL run, on the stream's own claim sets: a launch
   * equivalent to clcrt_run's without the library around it. */
  clcrt__params p;
  memset(&p, 0, sizeof p);
  p.tiles[0] = p.tiles[1] = p.tiles[2] = 1;
  p.units[0] = p.units[1] = p.units[2] = 1;
  p.num_units = p.num_clusters = 1;
  p.active = 1, p.chunk_cycles = 8000, p.early_min = 2;
  /* The one cluster's unit is its own (a persistent grid): the run claims nothing, so clcrt_run
   * launches it without the scheduler's response ring, and so does this bare launch. */
  p.claim_base = 1;
  CUdeviceptr counter;
  CK(cu->cuMemAlloc(&counter, 8192));
  static const unsigned char zeros[8192];
  bench_put(counter, zeros, sizeof zeros);
  p.state = counter;
  const int batches = 41, per = 200;
  double bare[41], lib[41];
  for (int b = 0; b < batches; b++) {
    for (int which = 0; which < 2; which++) {
      CK(cu->cuStreamSynchronize(cs));
      double t0 = clcrt__now_ms();
      for (int i = 0; i < per; i++) {
        if (which == 0) {
          CUlaunchConfig cfg;
          memset(&cfg, 0, sizeof cfg);
          cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
          cfg.blockDimX = 256, cfg.blockDimY = cfg.blockDimZ = 1;
          cfg.hStream = cs;
          void *kp[2] = {&args, &p};
          CK(cu->cuLaunchKernelEx(&cfg, k->fn, kp, NULL));
        } else if (clcrt_run(st, k, (clcrt_dim3){1, 1, 1}, &args, sizeof args) != CLCRT_OK) {
          exit(1);
        }
      }
      double us = (clcrt__now_ms() - t0) * 1e3 / per;
      (which ? lib : bare)[b] = us;
    }
  }
  CK(cu->cuStreamSynchronize(cs));
  /* medians */
  for (int i = 0; i < batches; i++)
    for (int j = i + 1; j < batches; j++) {
      if (bare[j] < bare[i]) { double t = bare[i]; bare[i] = bare[j]; bare[j] = t; }
      if (lib[j] < lib[i]) { double t = lib[i]; lib[i] = lib[j]; lib[j] = t; }
    }
  printf("\nhost overhead per launch (median of %d batches of %d calls, CPU clock):\n", batches, per);
  printf("  bare cuLaunchKernelEx %.3f us, clcrt_run %.3f us, difference %.3f us\n", bare[batches / 2],
         lib[batches / 2], lib[batches / 2] - bare[batches / 2]);
  emit_json("\"workload\":\"host-overhead\",\"bare_launch_us\":%.4f,\"clcrt_run_us\":%.4f", bare[batches / 2],
            lib[batches / 2]);
  cu->cuMemFree(x), cu->cuMemFree(y), cu->cuMemFree(counter);
}

