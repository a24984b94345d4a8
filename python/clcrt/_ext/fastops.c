/* clcrt._fastops: the eager path of clcrt.ops.gemm as one CPython call.
 *
 * clcrt.ops.gemm(a, b, out) checks its tensors and calls the op library once. Through ctypes
 * that cost about 3 us of Python and 1 us of argument conversion on an H100 host, on top of
 * the op itself (python/bench/overhead.py). Here the same checks run in C, through the
 * tensors' own Python methods (no libtorch headers: only the stable ABI, Py_LIMITED_API 3.10,
 * so that one build serves every CPython from 3.10 on), and the op is called with the GIL
 * released, as ctypes calls it.
 *
 * Two entries. gemm3(a, b, out), which clcrt.ops.gemm's Python path calls first, returns:
 *   - out (or a new tensor when out is None) once the op has been enqueued;
 *   - an int, the op's nonzero clcrt_status: the caller raises with the runtime's message;
 *   - None where this path does not apply (a dtype, device, shape or layout the Python path
 *     must check and explain, a device whose runtime is not bound yet, or a call autograd must
 *     record): the caller takes the Python path, which gives the same answer or a clear error.
 * gemm(a, b, out=None, **kw) is clcrt.ops.gemm itself where torch can trace around a C function
 * (see fast_gemm): it runs gemm3 and leaves the Python path what gemm3 leaves it.
 * Nothing here decides anything the Python path does not: it is the same checks in the same
 * order (python/tests/test_ops.py drives each one on the CPU through fake tensors; the GPU
 * differential test runs both paths against torch).
 *
 * State, set from Python (clcrt/ops.py): gemm_setup(python path, raise_status) at import;
 * setup(bf16, raw_stream, gemm_dense, is_grad_enabled) once torch is seen; bind(dev,
 * ops, streams) when a device's default runtime makes its clcrt_ops, and unbind(dev) before the
 * runtime destroys it (Runtime.close runs that first), so that no call here sees a freed op. */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

typedef int (*gemm_dense_fn)(void *ops, void *s, uint64_t a, uint64_t b, uint64_t d, unsigned m, unsigned n,
                             unsigned k, uint64_t lda, uint64_t ldb, uint64_t ldd, unsigned opts);

#define MAX_DEVICES 64

static PyObject *g_bf16;       /* torch.bfloat16 */
static PyObject *g_raw_stream; /* torch._C._cuda_getCurrentRawStream */
static gemm_dense_fn g_gemm;   /* clcrt_py_gemm_dense in the package's libclcrt_py.so */
static void *g_ops[MAX_DEVICES];
static PyObject *g_streams[MAX_DEVICES]; /* the runtime's dict: raw CUstream -> clcrt.Stream */
static PyObject *g_grad_enabled; /* torch._C.is_grad_enabled, or NULL (setup without it) */
static PyObject *s_dtype, *s_shape, *s_stride, *s_get_device, *s_data_ptr, *s_new_empty, *s_h, *s_requires_grad;

/* o.name(): CPython looks the method up without making a bound method object. */
static PyObject *call0(PyObject *o, PyObject *name) { return PyObject_CallMethodObjArgs(o, name, NULL); }

/* A 2-tuple of ints (a shape or strides) into x, y; 0 if it is not one. */
static int pair(PyObject *t, long long *x, long long *y) {
  if (!t || !PyTuple_Check(t) || PyTuple_Size(t) != 2) return 0;
  *x = PyLong_AsLongLong(PyTuple_GetItem(t, 0));
  *y = PyLong_AsLongLong(PyTuple_GetItem(t, 1));
  return !PyErr_Occurred();
}

/* An attribute or method result, called `name`, as a long long; 0 with no error set where it
 * is not an int. */
static int as_ll(PyObject *v, long long *out) {
  if (!v || !PyLong_Check(v)) return 0;
  *out = PyLong_AsLongLong(v);
  return !PyErr_Occurred();
}

static int is_bf16(PyObject *t) {
  PyObject *d = PyObject_GetAttr(t, s_dtype);
  int ok = d == g_bf16;
  Py_XDECREF(d);
  return ok;
}

/* shape, strides and device of a 2-D tensor; 0 (no error) where any is not as expected. */
static int meta(PyObject *t, long long *r, long long *c, long long *s0, long long *s1, long long *dev) {
  PyObject *sh = PyObject_GetAttr(t, s_shape);
  int ok = pair(sh, r, c);
  Py_XDECREF(sh);
  if (!ok) return 0;
  PyObject *st = call0(t, s_stride);
  ok = pair(st, s0, s1);
  Py_XDECREF(st);
  if (!ok) return 0;
  PyObject *d = call0(t, s_get_device);
  ok = as_ll(d, dev);
  Py_XDECREF(d);
  return ok;
}

static int data_ptr(PyObject *t, unsigned long long *p) {
  PyObject *v = call0(t, s_data_ptr);
  if (!v) return 0;
  *p = PyLong_AsUnsignedLongLong(v);
  Py_DECREF(v);
  return !PyErr_Occurred();
}

/* 1 where autograd must record the call (an operand that requires grad, grad mode on: the
 * Python path runs it through its autograd function), 0 where not, -1 on an error. The
 * operands are asked first: where neither requires grad (inference, weights without grad) grad
 * mode is not asked at all. */
static int wants_grad(PyObject *a, PyObject *b) {
  PyObject *ops[2] = {a, b};
  int any = 0;
  for (int i = 0; i < 2 && !any; i++) {
    PyObject *r = PyObject_GetAttr(ops[i], s_requires_grad);
    if (!r) return -1;
    any = r == Py_True;
    Py_DECREF(r);
  }
  if (!any || !g_grad_enabled) return any && !g_grad_enabled ? 1 : 0;
  PyObject *on = PyObject_CallObject(g_grad_enabled, NULL);
  if (!on) return -1;
  int e = on == Py_True;
  Py_DECREF(on);
  return e;
}

/* Any exception raised by a tensor method is dropped: the Python path raises its own. */
#define DECLINE()                                                                                                      \
  do {                                                                                                                 \
    PyErr_Clear();                                                                                                     \
    Py_XDECREF(made);                                                                                                  \
    Py_RETURN_NONE;                                                                                                    \
  } while (0)

/* gemm3(a, b, out) for fast_gemm3 and fast_gemm: a new reference to out (or to the tensor made),
 * an int status, or None; never an exception. */
static PyObject *gemm3(PyObject *a, PyObject *b, PyObject *out) {
  PyObject *made = NULL;
  if (!g_gemm || !g_bf16) DECLINE();
  long long m, k, n, kb, sa0, sa1, sb0, sb1, dev, devb;
  if (!is_bf16(a) || !is_bf16(b)) DECLINE();
  if (!meta(a, &m, &k, &sa0, &sa1, &dev) || !meta(b, &n, &kb, &sb0, &sb1, &devb)) DECLINE();
  /* the checks of clcrt.ops.gemm's fast path, in its order */
  if (kb != k || dev < 0 || dev >= MAX_DEVICES || devb != dev || (sa1 != 1 && k > 1) || (sb1 != 1 && k > 1))
    DECLINE();
  if (m <= 0 || n <= 0 || k <= 0 || m > 0xffffffffll || n > 0xffffffffll || k > 0xffffffffll) DECLINE();
  /* the layout the kernels load (the Python path copies any other operand) */
  if ((k & 7) || (m > 1 && (sa0 & 7)) || (n > 1 && (sb0 & 7))) DECLINE();
  if (!g_ops[dev] || !g_streams[dev]) DECLINE();
  if (wants_grad(a, b)) DECLINE(); /* autograd's, or an error (-1): the Python path's */
  unsigned long long pa, pb, pd;
  if (!data_ptr(a, &pa) || !data_ptr(b, &pb) || ((pa | pb) & 15)) DECLINE();
  long long ldd;
  if (out == Py_None) {
    /* new_empty(m, n), the sizes as two arguments: torch parses them faster than one tuple
     * (2.2 against 3.1 us per call on an H100 host, 2026-11-27). */
    PyObject *pm = PyLong_FromLongLong(m), *pn = PyLong_FromLongLong(n);
    made = pm && pn ? PyObject_CallMethodObjArgs(a, s_new_empty, pm, pn, NULL) : NULL;
    Py_XDECREF(pm);
    Py_XDECREF(pn);
    if (!made) DECLINE();
    out = made;
    ldd = n;
  } else {
    long long om, on, ld0, ld1, devo;
    if (!is_bf16(out) || !meta(out, &om, &on, &ld0, &ld1, &devo)) DECLINE();
    if (devo != dev || om != m || on != n || (ld1 != 1 && n > 1)) DECLINE();
    ldd = m > 1 ? ld0 : n;
  }
  /* torch's current stream on the device, as the runtime has wrapped it */
  PyObject *devo = PyLong_FromLongLong(dev);
  PyObject *raw = devo ? PyObject_CallFunctionObjArgs(g_raw_stream, devo, NULL) : NULL;
  Py_XDECREF(devo);
  if (!raw) DECLINE();
  PyObject *stream = PyDict_GetItemWithError(g_streams[dev], raw); /* borrowed */
  Py_DECREF(raw);
  if (!stream) DECLINE();
  PyObject *hv = PyObject_GetAttr(stream, s_h);
  void *sh = hv && hv != Py_None ? PyLong_AsVoidPtr(hv) : NULL;
  Py_XDECREF(hv);
  if (!sh || PyErr_Occurred()) DECLINE();
  if (!data_ptr(out, &pd)) DECLINE();
  void *ops = g_ops[dev];
  Py_INCREF(stream); /* alive while the GIL is released */
  const uint64_t lda = m > 1 ? (uint64_t)sa0 : (uint64_t)k, ldb = n > 1 ? (uint64_t)sb0 : (uint64_t)k;
  int st;
  Py_BEGIN_ALLOW_THREADS
  st = g_gemm(ops, sh, pa, pb, pd, (unsigned)m, (unsigned)n, (unsigned)k, lda, ldb, (uint64_t)ldd, 0);
  Py_END_ALLOW_THREADS
  Py_DECREF(stream);
  if (st != 0) {
    Py_XDECREF(made);
    return PyLong_FromLong(st);
  }
  if (made) return made;
  Py_INCREF(out);
  return out;
}

static PyObject *fast_gemm3(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3) Py_RETURN_NONE;
  return gemm3(args[0], args[1], args[2]);
}

/* ---- clcrt.ops.gemm itself ----
 * With torch.compiler.substitute_in_graph (ops.py), clcrt.ops.gemm is this function, so that an
 * eager call runs no Python frame: gemm(a, b), gemm(a, b, out) and gemm(a, b, out=out) take the
 * path above; anything else (other keywords, a call it declines) goes to the Python
 * implementation with the same arguments, and torch.compile traces that implementation in its
 * place. An op's nonzero status goes to a Python function that raises the runtime's message. */
static PyObject *g_fallback; /* clcrt.ops._gemm_py */
static PyObject *g_raise;    /* clcrt.ops._raise_status(a, status) */
static PyObject *s_out;

static PyObject *forward(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  if (!g_fallback) {
    PyErr_SetString(PyExc_RuntimeError, "clcrt._fastops: gemm_setup was not called");
    return NULL;
  }
  PyObject *t = PyTuple_New(nargs), *kw = NULL, *r = NULL;
  if (!t) return NULL;
  for (Py_ssize_t i = 0; i < nargs; i++) {
    Py_INCREF(args[i]);
    PyTuple_SetItem(t, i, args[i]); /* steals */
  }
  Py_ssize_t nk = kwnames ? PyTuple_Size(kwnames) : 0;
  if (nk > 0) {
    if (!(kw = PyDict_New())) goto done;
    for (Py_ssize_t j = 0; j < nk; j++)
      if (PyDict_SetItem(kw, PyTuple_GetItem(kwnames, j), args[nargs + j]) < 0) goto done;
  }
  r = PyObject_Call(g_fallback, t, kw);
done:
  Py_DECREF(t);
  Py_XDECREF(kw);
  return r;
}

static PyObject *fast_gemm(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
  (void)self;
  PyObject *out = Py_None;
  Py_ssize_t nk = kwnames ? PyTuple_Size(kwnames) : 0;
  if (nargs == 3 && nk == 0)
    out = args[2];
  else if (nargs == 2 && nk == 1 && PyUnicode_Compare(PyTuple_GetItem(kwnames, 0), s_out) == 0)
    out = args[2];
  else if (nargs != 2 || nk != 0)
    return forward(args, nargs, kwnames);
  PyObject *r = gemm3(args[0], args[1], out);
  if (r == Py_None) {
    Py_DECREF(r);
    return forward(args, nargs, kwnames);
  }
  if (!PyLong_Check(r) || !g_raise) return r;
  PyObject *e = PyObject_CallFunctionObjArgs(g_raise, args[0], r, NULL);
  Py_DECREF(r);
  return e;
}

static PyObject *fast_gemm_setup(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *fallback, *raise;
  if (!PyArg_ParseTuple(args, "OO", &fallback, &raise)) return NULL;
  Py_INCREF(fallback);
  Py_INCREF(raise);
  Py_XDECREF(g_fallback);
  Py_XDECREF(g_raise);
  g_fallback = fallback, g_raise = raise;
  Py_RETURN_NONE;
}

static PyObject *fast_setup(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *bf16, *raw, *grad = NULL;
  unsigned long long fn;
  if (!PyArg_ParseTuple(args, "OOK|O", &bf16, &raw, &fn, &grad)) return NULL;
  if (grad == Py_None) grad = NULL;
  Py_XDECREF(g_bf16);
  Py_XDECREF(g_raw_stream);
  Py_XDECREF(g_grad_enabled);
  Py_INCREF(bf16);
  Py_INCREF(raw);
  Py_XINCREF(grad);
  g_bf16 = bf16, g_raw_stream = raw, g_grad_enabled = grad;
  g_gemm = (gemm_dense_fn)(uintptr_t)fn;
  Py_RETURN_NONE;
}

static PyObject *fast_bind(PyObject *self, PyObject *args) {
  (void)self;
  int dev;
  unsigned long long ops;
  PyObject *streams;
  if (!PyArg_ParseTuple(args, "iKO!", &dev, &ops, &PyDict_Type, &streams)) return NULL;
  if (dev < 0 || dev >= MAX_DEVICES) Py_RETURN_FALSE;
  Py_INCREF(streams);
  Py_XDECREF(g_streams[dev]);
  g_streams[dev] = streams;
  g_ops[dev] = (void *)(uintptr_t)ops;
  Py_RETURN_TRUE;
}

static PyObject *fast_unbind(PyObject *self, PyObject *args) {
  (void)self;
  int dev;
  unsigned long long ops;
  if (!PyArg_ParseTuple(args, "iK", &dev, &ops)) return NULL;
  /* only the binding of that op: a later runtime of the device may have bound its own */
  if (dev >= 0 && dev < MAX_DEVICES && g_ops[dev] == (void *)(uintptr_t)ops) {
    g_ops[dev] = NULL;
    Py_CLEAR(g_streams[dev]);
  }
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"gemm3", (PyCFunction)(void (*)(void))fast_gemm3, METH_FASTCALL,
     "gemm3(a, b, out): clcrt.ops.gemm's eager path; out, a status, or None (take the Python path)"},
    {"setup", fast_setup, METH_VARARGS,
     "setup(torch.bfloat16, raw_stream_fn, clcrt_py_gemm_dense address[, is_grad_enabled])"},
    {"bind", fast_bind, METH_VARARGS, "bind(device, ops handle, the runtime's stream dict)"},
    {"unbind", fast_unbind, METH_VARARGS, "unbind(device, ops handle): before the op is destroyed"},
    {"gemm", (PyCFunction)(void (*)(void))fast_gemm, METH_FASTCALL | METH_KEYWORDS,
     "gemm($module, a, b, out=None, *, variant=None, sched=None, stream=None, split=None, measured=False, "
     "done=None)\n--\n\n"
     "out = a @ b.T for bf16 a (M x K) and b (N x K), fp32 accumulation:\n"
     "torch.nn.functional.linear(a, b). Operands whose rows are not contiguous, or whose K, row\n"
     "pitch or base the kernels cannot load (K or pitch not a multiple of 8, base not 16-byte\n"
     "aligned) run on a copy made each call. a may have other than two dimensions (... x K, its\n"
     "leading ones taken as rows), out then ... x N. Where a or b requires grad and grad mode\n"
     "is on, autograd records the call (the gradients through torch.matmul; no out= then).\n"
     "Under torch.autocast(\"cuda\"), fp32 and fp16 operands are cast to bf16 first.\n"
     "\n"
     "out (M x N, bf16) is made when not given. variant names one of\n"
     "variants(), sched a scheduler (\"steal\", \"static\", \"fixed\"), split \"none\" or \"all\"\n"
     "(stream-K everywhere): each None for the plan's choice. measured: the plan measured once\n"
     "per shape class and kept (synchronises on that first call). done: an int32 tensor on the\n"
     "same GPU of at least ceil(M / 64) counters, one per 64 rows of out, to which the run adds\n"
     "rows x N per block as the rows are stored (clcrt_gemm_desc.done: for consumers that start\n"
     "on finished rows while the GEMM runs, as clcrt.tp does). Returns out."},
    {"gemm_setup", fast_gemm_setup, METH_VARARGS, "gemm_setup(python gemm, raise_status(a, status))"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastops", "clcrt.ops.gemm's eager path in C", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__fastops(void);
PyMODINIT_FUNC PyInit__fastops(void) {
  s_dtype = PyUnicode_InternFromString("dtype");
  s_shape = PyUnicode_InternFromString("shape");
  s_stride = PyUnicode_InternFromString("stride");
  s_get_device = PyUnicode_InternFromString("get_device");
  s_data_ptr = PyUnicode_InternFromString("data_ptr");
  s_new_empty = PyUnicode_InternFromString("new_empty");
  s_h = PyUnicode_InternFromString("_h");
  s_out = PyUnicode_InternFromString("out");
  s_requires_grad = PyUnicode_InternFromString("requires_grad");
  if (!s_dtype || !s_shape || !s_stride || !s_get_device || !s_data_ptr || !s_new_empty || !s_h || !s_out ||
      !s_requires_grad)
    return NULL;
  return PyModule_Create(&module);
}
