/* Calls two modules exported by tecomp, without Python, and compares with numpy.

   mm.so is linked, and called through the typed wrapper its generated header declares.
   conv2d.so is opened with dlopen and its function found by name in the function table
   every tecomp library carries (tecomp_module_info): the table gives each parameter's
   dtype, shape and whether it is written, which is all a generic loader needs.

   Inputs and numpy's results are in data/ (written by export_modules.py). */

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mm.h"

#define N_ROWS 100 /* mm's symbolic size n, chosen by the caller */
#define K 64
#define M 32

static void *load(const char *path, size_t bytes) {
  void *buf = malloc(bytes ? bytes : 1);
  FILE *f = fopen(path, "rb");
  if (!buf || !f || fread(buf, 1, bytes, f) != bytes) {
    fprintf(stderr, "cannot read %zu bytes from %s\n", bytes, path);
    exit(1);
  }
  fclose(f);
  return buf;
}

/* Largest difference from numpy, relative to the result's largest magnitude. */
static int check(const char *what, const float *got, const float *want, size_t n) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < n; i++) {
    err = fmax(err, fabs((double)got[i] - want[i]));
    scale = fmax(scale, fabs((double)want[i]));
  }
  int ok = err <= 1e-5 * scale + 1e-6;
  printf("%-7s %zu values, max |error| %.3g (max |value| %.3g): %s\n", what, n, err, scale,
         ok ? "matches numpy" : "MISMATCH");
  return ok;
}

static int run_matmul(void) {
  float *a = load("data/mm_A.bin", sizeof(float) * N_ROWS * K);
  float *b = load("data/mm_B.bin", sizeof(float) * K * M);
  float *want = load("data/mm_C.expected.bin", sizeof(float) * N_ROWS * M);
  float *c = calloc(N_ROWS * M, sizeof(float));
  if (tecomp_call_mm(a, b, c, N_ROWS) != 0) return 0;
  int ok = check("mm", c, want, N_ROWS * M);
  free(a), free(b), free(want), free(c);
  return ok;
}

static int run_by_name(const char *library, const char *name) {
  void *lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 0;
  }
  const tecomp_module_t *info = dlsym(lib, "tecomp_module_info");
  const tecomp_function *f = NULL;
  for (int i = 0; info && i < info->num_functions; i++)
    if (strcmp(info->functions[i].name, name) == 0) f = &info->functions[i];
  if (!f || f->num_sizes != 0) {
    fprintf(stderr, "%s has no function %s with constant shapes\n", library, name);
    return 0;
  }
  void *args[16];
  size_t count[16];
  char path[256];
  for (int p = 0; p < f->num_params; p++) {
    const tecomp_param *param = &f->params[p];
    count[p] = 1;
    for (int d = 0; d < param->ndim; d++) count[p] *= (size_t)param->dims[d];
    snprintf(path, sizeof path, "data/%s_%s.bin", name, param->name);
    args[p] = param->output ? calloc(count[p], param->itemsize)
                            : load(path, count[p] * param->itemsize);
  }
  /* No symbolic sizes: sizes holds just the call's error record, which a function with
     run-time checks fills when one fails (tecomp_check_message says which). */
  int64_t record[TECOMP_ERROR_RECORD_SLOTS] = {0};
  int32_t rc = f->fn(args, record);
  if (rc == TECOMP_CHECK_FAILED) {
    char text[256];
    fprintf(stderr, "%s\n", tecomp_check_message(f, record, text, sizeof text));
  }
  int ok = rc == 0;
  for (int p = 0; p < f->num_params; p++) {
    const tecomp_param *param = &f->params[p];
    if (param->output && strcmp(param->dtype, "float32") == 0) {
      snprintf(path, sizeof path, "data/%s_%s.expected.bin", name, param->name);
      float *want = load(path, count[p] * sizeof(float));
      ok = check(name, args[p], want, count[p]) && ok;
      free(want);
    }
    free(args[p]);
  }
  dlclose(lib);
  return ok;
}

int main(void) {
  int ok = run_matmul();
  ok = run_by_name("./conv2d.so", "conv2d") && ok;
  return ok ? 0 : 1;
}
