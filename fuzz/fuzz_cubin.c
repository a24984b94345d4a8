/* libFuzzer target for the cubin parser: any byte string must give either a parsed cubin
 * or an error sentence, never a crash, a hang, a leak or a read outside the input. Built
 * and run by scripts/fuzz.sh (clang -fsanitize=fuzzer,address,undefined). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cubin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  clcrt__cubin c;
  char err[256];
  volatile uint64_t sink = 0;
  int rc = clcrt__cubin_parse(data, size, &c, err, sizeof err);
  if (rc == 0) {
    /* Touch everything the tool prints, so that a bad pointer or length shows up here. */
    sink += strlen(c.arch) + c.file_bytes + (c.producer ? strlen(c.producer) : 0) +
            (c.tool_options ? strlen(c.tool_options) : 0);
    for (size_t i = 0; i < c.num_module_attrs; i++)
      for (uint32_t j = 0; j < c.module_attrs[i].len; j++) sink += c.module_attrs[i].bytes[j];
    for (size_t i = 0; i < c.num_kernels; i++) {
      const clcrt__cubin_kernel *k = &c.kernels[i];
      sink += strlen(k->name) + (uint64_t)k->registers + k->static_smem + k->text_bytes + (uint64_t)k->clc_count;
      for (size_t a = 0; a < k->num_attrs; a++)
        for (uint32_t j = 0; j < k->attrs[a].len; j++) sink += k->attrs[a].bytes[j];
    }
    if (c.file_bytes > size) __builtin_trap(); /* the image can never be larger than the input */
    clcrt__cubin_free(&c);
  } else if (strnlen(err, sizeof err) == sizeof err || err[0] == 0) {
    __builtin_trap(); /* every failure must come with a sentence */
  }
  int bc;
  sink += (uint64_t)clcrt__sass_count_clc(data, size, &bc);
  (void)sink;
  return 0;
}
