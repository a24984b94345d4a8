# clcrt — GNU make.
#   make              libclcrt.a, libclcrt.so and the clcrt tool
#   make test         CPU test suites (CI), the install test, the suites under ASan+UBSan, the fuzz smoke run
#   make test-install install to a temporary prefix, build and run the README example with pkg-config alone
#   make test-gpu     GPU test suites (skip, saying why, without a GPU)
#   make sanitize-gpu the GPU suites under compute-sanitizer memcheck, racecheck, synccheck
#   make demo         the README example: compile for sm_90a and sm_100a, run where a GPU is
#   make bench        the side-by-side scheduler benchmark (needs a GPU)
#   make bench-gemm   clcrt's GEMM tile functions against cuBLAS (needs a GPU)
#   make install PREFIX=/usr/local
#   make figures      docs/figures.md: the figures the README cites, measured here (scripts/figures.py)
# Sources are picked up by pattern: runtime/*/*.c is the library, tools/*.c the tool,
# tests/test_*.c CPU suites, tests/gpu_*.c GPU suites, bench/*.c benchmarks, one binary each.
# cuBLAS (the reference) is linked by GPU suites and benchmarks only, never by libclcrt.

CUDA_HOME ?= $(or $(patsubst %/bin/nvcc,%,$(shell command -v nvcc 2>/dev/null)),/usr/local/cuda)
PREFIX ?= /usr/local
BUILD ?= build
CC ?= cc
SAN ?=

WARN := -std=c11 -Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes -Werror
RUNTIME_DIRS := $(sort $(dir $(wildcard runtime/*/*.h)))
CPPFLAGS += -D_GNU_SOURCE -Iinclude $(RUNTIME_DIRS:%/=-I%) -Invrtc_src -I$(CUDA_HOME)/include -I$(BUILD)/gen
CFLAGS ?= -O2 -g
override CFLAGS += $(WARN) -fPIC -fvisibility=hidden -pthread
ifeq ($(SAN),1)
override CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
LDFLAGS += -fsanitize=address,undefined
endif

CUDA_LIBDIR := $(CUDA_HOME)/lib64
VERSION := $(shell awk '/^\#define CLCRT_VERSION_(MAJOR|MINOR|PATCH) /{printf "%s%s", s, $$3; s="."}' include/clcrt.h)
NVRTC_LIBS := -L$(CUDA_LIBDIR) -lnvrtc -Wl,-rpath,$(CUDA_LIBDIR)
# Test and benchmark binaries link Check and libuv statically so that they run on the GPU
# machine, which has neither.
STATIC_UV := -l:libuv_a.a
STATIC_CHECK := -l:libcheck.a -l:libsubunit.a
SYS_LIBS := -ldl -lm -lrt -pthread
CUBLAS_LIBS := -L$(CUDA_LIBDIR) -lcublasLt -lcublas
PNG_LIBS := -lpng

LIB_SRCS := $(sort $(wildcard runtime/*/*.c))
# The op library (ops/, include/clcrt_ops.h) is built into libclcrt but compiled against the
# public headers alone: nothing of runtime/ is on its include path, so it cannot depend on
# more than clcrt.h offers, and the runtime never includes it.
OPS_SRCS := $(sort $(wildcard ops/*.c))
OPS_OBJS := $(OPS_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/gen/ops_src.o
OPS_CPPFLAGS := -D_GNU_SOURCE -Iinclude -Iops -I$(CUDA_HOME)/include -I$(BUILD)/gen
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/%.o) $(BUILD)/gen/embedded.o $(OPS_OBJS)
TEMPLATE := $(sort $(wildcard nvrtc_src/*.cuh nvrtc_src/*.h))
TOOL_SRCS := $(sort $(wildcard tools/*.c))
TOOL_OBJS := $(TOOL_SRCS:%.c=$(BUILD)/%.o)
CPU_TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(sort $(wildcard tests/test_*.c)))
GPU_TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(sort $(wildcard tests/gpu_*.c)))
TEST_COMMON := $(sort $(wildcard tests/common/*.c))
TEST_COMMON_OBJS := $(TEST_COMMON:%.c=$(BUILD)/%.o)
BENCH_PROGS := $(patsubst bench/%.c,$(BUILD)/bench/%,$(sort $(wildcard bench/*.c)))
# Shared by the benchmark programs: timing, references, output (bench/lib/*.c).
BENCH_LIB_OBJS := $(patsubst %.c,$(BUILD)/%.o,$(sort $(wildcard bench/lib/*.c)))
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(sort $(wildcard examples/*.c examples/*/*.c)))

.PHONY: all deps lib tool test test-cpu test-asan test-install test-gpu sanitize-gpu demo bench bench-gemm benches examples install clean fuzz-smoke figures

all: deps lib tool

# Build dependencies: Check, libuv and pkg-config. Installed when missing and we are root,
# otherwise named in a clear message.
DEPS_STAMP := $(BUILD)/.deps-ok
deps: $(DEPS_STAMP)
$(DEPS_STAMP):
	@missing=""; \
	 [ -f /usr/include/uv.h ] || missing="$$missing libuv1-dev"; \
	 [ -f /usr/include/check.h ] || missing="$$missing check"; \
	 [ -f /usr/include/png.h ] || missing="$$missing libpng-dev"; \
	 python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
	   2>/dev/null || missing="$$missing python3-dev"; \
	 command -v pkg-config >/dev/null 2>&1 || missing="$$missing pkg-config"; \
	 if [ -n "$$missing" ]; then \
	   if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	     echo "clcrt: installing build dependencies:$$missing"; \
	     (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing) >/dev/null || \
	       { echo "clcrt: apt-get install$$missing failed" >&2; exit 1; }; \
	   else \
	     echo "clcrt: missing build dependencies:$$missing — install them (Debian/Ubuntu: sudo apt-get install$$missing)" >&2; \
	     exit 1; \
	   fi; \
	 fi; \
	 [ -x "$(CUDA_HOME)/bin/nvcc" ] || [ -f "$(CUDA_HOME)/include/nvrtc.h" ] || \
	   { echo "clcrt: no CUDA toolkit at $(CUDA_HOME) — set CUDA_HOME" >&2; exit 1; }
	@mkdir -p $(BUILD) && touch $@

lib: $(BUILD)/libclcrt.a $(BUILD)/libclcrt.so
tool: $(BUILD)/clcrt

$(BUILD)/%.o: %.c $(wildcard include/*.h nvrtc_src/*.h nvrtc_src/*.cuh runtime/*/*.h tests/common/*.h tools/*.h bench/lib/*.h ops/*.h) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# Tests and the benchmark's oracle read the op's internals (ops/gemm_internal.h: variants, plan).
$(BUILD)/tests/%.o $(BUILD)/bench/%.o: CPPFLAGS += -Iops

$(BUILD)/ops/%.o: ops/%.c $(wildcard include/*.h ops/*.h nvrtc_src/clcrt_streamk.cuh) $(BUILD)/gen/ops_src.h | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(OPS_CPPFLAGS) $(CFLAGS) -c $< -o $@

$(BUILD)/embed: scripts/embed.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) -O1 -o $@ $<

$(BUILD)/gen/embedded.c: $(TEMPLATE) $(BUILD)/embed
	@mkdir -p $(dir $@)
	$(BUILD)/embed $@ $(TEMPLATE)

$(BUILD)/gen/embedded.o: $(BUILD)/gen/embedded.c runtime/compile/embedded.h
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

# The op library's tile source and the header it shares with the host, embedded as C strings
# (clcrt__ops_src[], declared in the generated ops_src.h). One command writes both, the header first.
OPS_CU := ops/gemm.cu ops/gemm_abi.h ops/gemm_wgmma.h
$(BUILD)/gen/ops_src.h: $(OPS_CU) $(BUILD)/embed
	@mkdir -p $(dir $@)
	$(BUILD)/embed --table clcrt__ops_src --header $@ $(BUILD)/gen/ops_src.c $(OPS_CU)

$(BUILD)/gen/ops_src.c: $(BUILD)/gen/ops_src.h

$(BUILD)/gen/ops_src.o: $(BUILD)/gen/ops_src.c $(BUILD)/gen/ops_src.h
	$(CC) $(OPS_CPPFLAGS) $(CFLAGS) -c $< -o $@

# tests/test_guide.c and tests/gpu_examples.c compile the teaching examples in (examples/*.c).
$(BUILD)/tests/test_guide.o $(BUILD)/tests/gpu_examples.o: $(wildcard examples/*.c)
# tests/test_bench_gemm.c checks the GEMM benchmark's shape classes (bench/lib/gemm_classes.c) on the CPU.
$(BUILD)/tests/test_bench_gemm.o: bench/lib/gemm_classes.c

$(BUILD)/libclcrt.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libclcrt.so: $(LIB_OBJS)
	$(CC) -shared -Wl,-soname,libclcrt.so.0 $(LDFLAGS) -o $@ $^ $(NVRTC_LIBS) -luv $(SYS_LIBS)

# The suites run the tool; its ASan build carries their LeakSanitizer suppressions
# (tests/common/lsan.c: NVRTC's own leak in traced compiles). Other builds link nothing more.
TOOL_SAN_OBJS := $(if $(filter 1,$(SAN)),$(BUILD)/tests/common/lsan.o)
$(BUILD)/clcrt: $(TOOL_OBJS) $(TOOL_SAN_OBJS) $(BUILD)/libclcrt.a
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJS) $(TOOL_SAN_OBJS) $(BUILD)/libclcrt.a $(NVRTC_LIBS) $(STATIC_UV) $(PNG_LIBS) \
	  $(SYS_LIBS)

$(BUILD)/tests/test_%: $(BUILD)/tests/test_%.o $(TEST_COMMON_OBJS) $(BUILD)/libclcrt.a
	$(CC) $(LDFLAGS) -o $@ $< $(TEST_COMMON_OBJS) $(BUILD)/libclcrt.a $(NVRTC_LIBS) $(STATIC_CHECK) $(STATIC_UV) $(SYS_LIBS)

$(BUILD)/tests/gpu_%: $(BUILD)/tests/gpu_%.o $(TEST_COMMON_OBJS) $(BUILD)/libclcrt.a
	$(CC) $(LDFLAGS) -o $@ $< $(TEST_COMMON_OBJS) $(BUILD)/libclcrt.a $(NVRTC_LIBS) $(CUBLAS_LIBS) $(STATIC_CHECK) $(STATIC_UV) $(SYS_LIBS)

$(BUILD)/examples/%: $(BUILD)/examples/%.o $(BUILD)/libclcrt.a
	$(CC) $(LDFLAGS) -o $@ $< $(BUILD)/libclcrt.a $(NVRTC_LIBS) $(STATIC_UV) $(SYS_LIBS) $(EXAMPLE_LIBS)

# The README example calls the driver API itself (cuMemAlloc), as a user's program does, so
# it links libcuda: the toolkit's stub at link time, the driver's libcuda.so.1 at run time.
$(BUILD)/examples/readme_example: EXAMPLE_LIBS = -L$(CUDA_LIBDIR)/stubs -lcuda

$(BUILD)/bench/%: $(BUILD)/bench/%.o $(BENCH_LIB_OBJS) $(BUILD)/libclcrt.a
	$(CC) $(LDFLAGS) -o $@ $< $(BENCH_LIB_OBJS) $(BUILD)/libclcrt.a $(NVRTC_LIBS) $(CUBLAS_LIBS) $(STATIC_UV) $(SYS_LIBS)

examples: $(EXAMPLES)

# Each suite runs in Check's fork mode, one process per test, with a timeout; the ASan+UBSan
# build runs every test several times slower, so its timeouts are CK_MULT times as long (a
# test of 10 processes that each compile once, test_launch's exit_with_a_build_running, took
# over 120 s in a CI run on the 2-core machine, 78 s for its whole suite in others).
CK_MULT ?= 1
TEST_ENV := CUDA_HOME=$(CUDA_HOME) CK_FORK=yes CK_DEFAULT_TIMEOUT=120 CK_TIMEOUT_MULTIPLIER=$(CK_MULT) \
	CLCRT_TEST_TOOL=$(BUILD)/clcrt CLCRT_TEST_BUILD=$(BUILD)

test-cpu: all $(CPU_TESTS)
	@set -e; for t in $(CPU_TESTS); do echo "== $$t"; $(TEST_ENV) $$t; done

test-asan: deps
	$(MAKE) --no-print-directory BUILD=build/asan SAN=1 CFLAGS="-O1 -g" CK_MULT=3 test-cpu

test: test-cpu test-install test-asan fuzz-smoke test-python
	@echo "clcrt: all CPU suites passed (normal and ASan+UBSan builds)"

test-gpu: all $(GPU_TESTS)
	@set -e; for t in $(GPU_TESTS); do echo "== $$t"; $(TEST_ENV) $$t; done

SANITIZER ?= compute-sanitizer
sanitize-gpu: all $(GPU_TESTS)
	@set -e; for tool in memcheck racecheck synccheck; do for t in $(GPU_TESTS); do \
	  echo "== $(SANITIZER) --tool $$tool $$t"; \
	  CK_FORK=no CLCRT_TEST_SANITIZER=1 $(SANITIZER) --tool $$tool --error-exitcode 3 $$t; done; done

demo: all $(BUILD)/examples/demo
	$(BUILD)/examples/demo

benches: $(BENCH_PROGS)

bench: all $(BUILD)/bench/bench
	$(BUILD)/bench/bench --json $(BUILD)/bench.json
	@python3 scripts/bench_chart.py $(BUILD)/bench.json $(BUILD)/bench.png 2>/dev/null && echo "chart: $(BUILD)/bench.png" || \
	  echo "no chart: scripts/bench_chart.py needs python3 with matplotlib"

bench-gemm: all $(BUILD)/bench/bench_gemm
	$(BUILD)/bench/bench_gemm --json $(BUILD)/bench-gemm.json
	@python3 scripts/bench_chart.py $(BUILD)/bench-gemm.json $(BUILD)/bench-gemm.png 2>/dev/null && echo "chart: $(BUILD)/bench-gemm.png" || \
	  echo "no chart: scripts/bench_chart.py needs python3 with matplotlib"

# docs/figures.md: the README example's kernel figures and first-compile times on this machine.
figures: all $(BUILD)/examples/cache_timing
	CUDA_HOME="$(CUDA_HOME)" python3 scripts/figures.py --build $(BUILD)

fuzz-smoke: all
	@if [ -x scripts/fuzz.sh ]; then CUDA_HOME="$(CUDA_HOME)" scripts/fuzz.sh smoke; fi

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/clcrt.h include/clcrt_ops.h $(DESTDIR)$(PREFIX)/include/
	install -m 644 $(BUILD)/libclcrt.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libclcrt.so $(DESTDIR)$(PREFIX)/lib/libclcrt.so.0
	ln -sf libclcrt.so.0 $(DESTDIR)$(PREFIX)/lib/libclcrt.so
	install -m 755 $(BUILD)/clcrt $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@CUDA_HOME@|$(abspath $(CUDA_HOME))|g' -e 's|@VERSION@|$(VERSION)|g' \
	  clcrt.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/clcrt.pc

# The install a user builds from: install to a temporary prefix, build the README example
# (examples/readme_example.c, which the README shows verbatim) with pkg-config alone, and run
# it to its result, or without a GPU to its CLCRT_E_NO_DEVICE message and exit status 2.
test-install: all
	@BUILD="$(BUILD)" CUDA_HOME="$(CUDA_HOME)" CC="$(CC)" MAKE="$(MAKE)" scripts/test_install.sh

clean:
	rm -rf build

.SECONDARY:

# ---- Python package (python/) -----------------------------------------------------------
#   make python        build/python/dist/clcrt-<version>-py3-none-linux_x86_64.whl
#   make test-python   that wheel installed into a venv (build/python/venv, pytest from PyPI),
#                      then python/tests: CPU tests in compile-only mode; the GPU tests skip
#                      without torch and a GPU
# The wheel bundles libclcrt_py.so (the library's objects and python/clcrt/_csrc/*.c; no libuv:
# _csrc/no_uv.c replaces the libuv glue, whose archive is not position-independent here; it
# needs libc and libnvrtc.so.13 only, NVRTC found at import) and the clcrt tool (libuv,
# libpng and zlib linked in statically). Both are stripped of debug information.
PY_BUILD := $(BUILD)/python
PY_VERSION := $(shell awk '/^\#define CLCRT_VERSION_(MAJOR|MINOR|PATCH) /{printf "%s%s", s, $$3; s="."}' include/clcrt.h)
PY_SHIM_OBJS := $(patsubst python/clcrt/_csrc/%.c,$(PY_BUILD)/obj/%.o,$(sort $(wildcard python/clcrt/_csrc/*.c)))
PY_LIB := $(PY_BUILD)/libclcrt_py.so
PY_TOOL := $(PY_BUILD)/clcrt
PY_WHEEL := $(PY_BUILD)/dist/clcrt-$(PY_VERSION)-py3-none-linux_x86_64.whl
PY_VENV := $(PY_BUILD)/venv
PY_STATIC_PNG := -l:libpng16.a -l:libz.a

.PHONY: python test-python

# python/gen_types.py makes, from the public headers, the package's ctypes declarations (the
# wheel's clcrt/_types_gen.py; python/clcrt/ holds a checked-in copy that a test keeps current)
# and layout_gen.h, whose assertions stop the build where the compiler lays a structure out
# otherwise than ctypes lays out its generated class.
PY_GEN := $(PY_BUILD)/gen
$(PY_GEN)/stamp: python/gen_types.py include/clcrt.h include/clcrt_ops.h
	python3 python/gen_types.py --out $(PY_GEN)
	@touch $@
$(PY_BUILD)/obj/shim.o: $(PY_GEN)/stamp
$(PY_BUILD)/obj/shim.o: CPPFLAGS += -I$(PY_GEN)

$(PY_BUILD)/obj/%.o: python/clcrt/_csrc/%.c $(wildcard python/clcrt/_csrc/*.h include/*.h nvrtc_src/*.h nvrtc_src/*.cuh runtime/*/*.h) | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

PY_LIB_OBJS := $(filter-out $(BUILD)/runtime/compile/async.o,$(LIB_OBJS))
$(PY_LIB): $(PY_LIB_OBJS) $(PY_SHIM_OBJS)
	$(CC) -shared -Wl,-soname,libclcrt_py.so -Wl,-z,defs -Wl,--as-needed -Wl,-S $(LDFLAGS) -o $@ $^ \
	  -L$(CUDA_LIBDIR) -lnvrtc $(SYS_LIBS)

$(PY_TOOL): $(TOOL_OBJS) $(BUILD)/libclcrt.a
	$(CC) -Wl,-S $(LDFLAGS) -o $@ $(TOOL_OBJS) $(BUILD)/libclcrt.a -L$(CUDA_LIBDIR) -lnvrtc $(STATIC_UV) $(PY_STATIC_PNG) $(SYS_LIBS)

# clcrt._fastops: gemm's eager path as one CPython call (python/clcrt/_ext/fastops.c), built
# against the stable ABI (3.10 on) so that one file serves every CPython the wheel meets.
PY_EXT := $(PY_BUILD)/_fastops.abi3.so
PY_INCLUDES = $(shell python3 -c 'import sysconfig; print("-I" + sysconfig.get_paths()["include"])')
$(PY_EXT): python/clcrt/_ext/fastops.c | $(DEPS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -fPIC -shared -Wl,-S $(PY_INCLUDES) $< -o $@

$(PY_WHEEL): $(PY_LIB) $(PY_TOOL) $(PY_EXT) $(PY_GEN)/stamp $(wildcard python/clcrt/*.py python/README.md) python/build_wheel.py
	@rm -f $(PY_BUILD)/dist/clcrt-*.whl
	python3 python/build_wheel.py --version $(PY_VERSION) --lib $(PY_LIB) --tool $(PY_TOOL) --ext $(PY_EXT) \
	  --types-gen $(PY_GEN)/_types_gen.py --out $(PY_BUILD)/dist

python: all $(PY_WHEEL)

test-python: python
	@[ -x $(PY_VENV)/bin/python ] || python3 -m venv $(PY_VENV)
	@$(PY_VENV)/bin/python -c 'import pytest' 2>/dev/null || $(PY_VENV)/bin/python -m pip install -q pytest
	@$(PY_VENV)/bin/python -m pip install -q --force-reinstall --no-deps --no-index $(PY_WHEEL)
	cd $(PY_BUILD) && PYTHONDONTWRITEBYTECODE=1 CUDA_HOME=$(CUDA_HOME) $(abspath $(PY_VENV))/bin/python -m pytest -q -rs -p no:cacheprovider $(CURDIR)/python/tests
