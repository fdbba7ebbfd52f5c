/* A stand-in for libcuda.so.1 with just what the graph-capture bindings call, for a CPU
   test of ccogen._ccogen_rt's begin_capture / end_capture / Graph (no GPU needed).
   Launches issued while a stream captures are counted into the graph; a graph launch
   "executes" them; every call is logged, one line each, to $FAKE_CUDA_LOG.
   Instantiating an empty graph fails with CUDA_ERROR_INVALID_VALUE (1). */
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
static int capturing = 0, captured = 0, executed = 0;

static void log_line(const char* what, int n) {
  const char* path = getenv("FAKE_CUDA_LOG");
  if (path == NULL) return;
  FILE* f = fopen(path, "a");
  if (f == NULL) return;
  fprintf(f, "%s %d\n", what, n);
  fclose(f);
}

CUresult cuInit(unsigned flags) { (void)flags; return 0; }
CUresult cuGetErrorName(CUresult r, const char** s) { *s = r == 1 ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_UNKNOWN"; return 0; }
CUresult cuGetErrorString(CUresult r, const char** s) { (void)r; *s = "fake"; return 0; }
CUresult cuDeviceGetCount(int* n) { *n = 1; return 0; }
CUresult cuDeviceGet(int* d, int ordinal) { *d = ordinal; return 0; }
CUresult cuDevicePrimaryCtxRetain(void** ctx, int dev) { (void)dev; *ctx = (void*)0x10; return 0; }
CUresult cuCtxSetCurrent(void* ctx) { (void)ctx; return 0; }
CUresult cuStreamCreate(void** s, unsigned flags) { (void)flags; *s = (void*)0x20; return 0; }
CUresult cuStreamDestroy_v2(void* s) { (void)s; return 0; }
CUresult cuModuleLoadData(void** m, const void* image) { (void)image; *m = (void*)0x30; return 0; }
CUresult cuModuleUnload(void* m) { (void)m; return 0; }
CUresult cuModuleGetFunction(void** f, void* m, const char* name) { (void)m; (void)name; *f = (void*)0x40; return 0; }
CUresult cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, void* stream, void** params, void** extra) {
  (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)smem; (void)stream;
  (void)params; (void)extra;
  if (capturing) { captured++; log_line("captured", captured); }
  else { executed++; log_line("executed", executed); }
  return 0;
}
CUresult cuStreamBeginCapture_v2(void* stream, int mode) {
  (void)stream;
  capturing = 1; captured = 0;
  log_line("begin_capture mode", mode);
  return 0;
}
CUresult cuStreamEndCapture(void* stream, void** graph) {
  (void)stream;
  capturing = 0;
  *graph = (void*)(long)(0x1000 + captured);
  log_line("end_capture", captured);
  return 0;
}
CUresult cuGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long flags) {
  (void)flags;
  long n = (long)graph - 0x1000;
  if (n == 0) return 1;
  *exec = (void*)(0x2000 + n);
  return 0;
}
CUresult cuGraphLaunch(void* exec, void* stream) {
  (void)stream;
  long n = (long)exec - 0x2000;
  executed += (int)n;
  log_line("graph_launch", (int)n);
  return 0;
}
CUresult cuGraphExecDestroy(void* exec) { log_line("exec_destroy", (int)((long)exec - 0x2000)); return 0; }
CUresult cuGraphDestroy(void* graph) { log_line("graph_destroy", (int)((long)graph - 0x1000)); return 0; }
