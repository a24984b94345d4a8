/* Placeholder until the compile cache lands: nothing is cached. */
#include "cache.h"

clcrt_status clcrt__cache_init(clcrt_runtime *rt) {
  rt->disk_dir = NULL;
  return CLCRT_OK;
}
void clcrt__cache_fini(clcrt_runtime *rt) { (void)rt; }
int clcrt__cache_key(clcrt_runtime *rt, const clcrt__build *b, uint8_t key[CLCRT__KEY_BYTES]) {
  (void)rt, (void)b, (void)key;
  return 0;
}
int clcrt__disk_get(clcrt_runtime *rt, const uint8_t key[CLCRT__KEY_BYTES], clcrt__build *b) {
  (void)rt, (void)key, (void)b;
  return 0;
}
void clcrt__disk_put(clcrt_runtime *rt, const uint8_t key[CLCRT__KEY_BYTES], const clcrt__build *b) {
  (void)rt, (void)key, (void)b;
}
