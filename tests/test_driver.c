/* The driver table's ABI: cuGetProcAddress hands out the newest ABI of a name for
 * CUDA_VERSION, while the table's pointer types come from cuda.h's prototypes. They agree
 * only where cuda.h maps the name to its newest version (cuMemAlloc -> cuMemAlloc_v2) or
 * the name has a single version. cuCtxSynchronize broke that once (a segfault on the
 * GPU). This test reads the toolkit's cudaTypedefs.h and cuda.h and holds every name in
 * the table to that rule. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (b) b[n] = 0;
  fclose(f);
  return b;
}

static const char *cuda_home(void) {
  const char *h = getenv("CUDA_HOME");
  return h && *h ? h : "/usr/local/cuda";
}

/* Distinct versions "PFN_<name>_v<digits>" mentioned in the typedefs. */
static int versions(const char *typedefs, const char *name) {
  char pat[128], seen[16][32];
  int n = 0;
  snprintf(pat, sizeof pat, "PFN_%s_v", name);
  for (const char *p = strstr(typedefs, pat); p; p = strstr(p + 1, pat)) {
    const char *d = p + strlen(pat);
    char v[32];
    int i = 0;
    while (d[i] >= '0' && d[i] <= '9' && i < 31) v[i] = d[i], i++;
    v[i] = 0;
    if (!i) continue;
    int dup = 0;
    for (int j = 0; j < n; j++) dup |= !strcmp(seen[j], v);
    if (!dup && n < 16) strcpy(seen[n++], v);
  }
  return n;
}

START_TEST(test_driver_abi) {
  char path[512];
  snprintf(path, sizeof path, "%s/include/cudaTypedefs.h", cuda_home());
  char *typedefs = slurp(path);
  snprintf(path, sizeof path, "%s/include/cuda.h", cuda_home());
  char *cudah = slurp(path);
  ck_assert_msg(typedefs && cudah, "the CUDA toolkit headers under %s are needed", cuda_home());
  int checked = 0;
  for (const char *const *nm = clcrt__driver_names; *nm; nm++) {
    int nv = versions(typedefs, *nm);
    ck_assert_msg(nv >= 1, "%s: no PFN typedef in cudaTypedefs.h", *nm);
    if (nv > 1) {
      char def[128];
      snprintf(def, sizeof def, "#define %s ", *nm);
      ck_assert_msg(strstr(cudah, def) != NULL,
                    "%s has %d ABI versions but cuda.h does not map the name to the newest: cuGetProcAddress "
                    "would return a function of another signature (remove it from CLCRT_DRIVER_MAP)",
                    *nm, nv);
    }
    checked++;
  }
  ck_assert_int_ge(checked, 30);
  /* The rule catches the one that bit us. */
  ck_assert_int_gt(versions(typedefs, "cuCtxSynchronize"), 1);
  ck_assert_ptr_null(strstr(cudah, "#define cuCtxSynchronize "));
  free(typedefs);
  free(cudah);
}
END_TEST

/* The optional entries (green contexts) are asked for at a fixed version, by the symbol
 * cuGetProcAddress knows: that version's typedef must exist, and the table's field must be a
 * prototype of cuda.h (its type is the field's). */
START_TEST(test_driver_optional_abi) {
  char path[512];
  snprintf(path, sizeof path, "%s/include/cudaTypedefs.h", cuda_home());
  char *typedefs = slurp(path);
  snprintf(path, sizeof path, "%s/include/cuda.h", cuda_home());
  char *cudah = slurp(path);
  ck_assert_msg(typedefs && cudah, "the CUDA toolkit headers under %s are needed", cuda_home());
  int n = 0;
  for (const clcrt__driver_opt_name *o = clcrt__driver_opt_names; o->symbol; o++, n++) {
    char pat[160];
    snprintf(pat, sizeof pat, "PFN_%s_v%d)", o->symbol, o->version);
    ck_assert_msg(strstr(typedefs, pat) != NULL, "%s: cudaTypedefs.h has no %s", o->field, pat);
    snprintf(pat, sizeof pat, "CUresult CUDAAPI %s(", o->field);
    ck_assert_msg(strstr(cudah, pat) != NULL, "%s: cuda.h has no prototype %s", o->field, pat);
    /* A version newer than the headers would never be returned by this driver ABI. */
    ck_assert_int_le(o->version, CUDA_VERSION);
  }
  ck_assert_int_ge(n, 8);
  free(typedefs);
  free(cudah);
}
END_TEST

int main(void) {
  Suite *s = suite_create("driver");
  TCase *tc = tcase_create("abi");
  tcase_add_test(tc, test_driver_abi);
  tcase_add_test(tc, test_driver_optional_abi);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
