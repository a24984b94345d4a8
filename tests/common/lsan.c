/* LeakSanitizer suppressions for the ASan builds of the tests and of the clcrt tool they run
 * (make test-asan; the Makefile links this file into the tool only there).
 *
 * NVRTC 13.0 leaks what its time trace records: 13.7 KB per compile of a one-line kernel
 * with --fdevice-time-trace, and nothing without it (measured with NVRTC alone under ASan).
 * The compile cache traces the compiles of sources that may include a header from disk
 * (runtime/cache/deps.h), so the suites that compile such sources would report NVRTC's
 * leak as theirs. Only allocations made inside nvrtcCompileProgram are suppressed; the
 * library's own leaks are still caught here and, block by block, by test_oom's counting
 * allocator. */
const char *__lsan_default_suppressions(void) __attribute__((visibility("default"), used));
const char *__lsan_default_suppressions(void) { return "leak:nvrtcCompileProgram\n"; }
