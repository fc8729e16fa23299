/* tecomp_run: call one function of an exported tecomp library, without Python.

   usage: tecomp_run LIBRARY FUNCTION [-n NUMBER] [-r REPEAT] [-w WARMUP_MS]
                     [-s SIZE]... ARGFILE...

   LIBRARY is a shared library written by export_library; FUNCTION a function in it ("-"
   for the first). Each ARGFILE holds one buffer parameter's bytes (C order), in the
   function's parameter order; -s gives the symbolic sizes in the order of its
   size_names. The function runs once; the buffers it writes are written back to their
   files. With -n NUMBER > 0 it then runs untimed for WARMUP_MS and REPEAT batches of
   NUMBER calls, printing "time SECONDS_PER_CALL" per batch.

   When a run-time check of the function fails (an index out of range, an integer
   division by zero), the buffers are still written back; it prints "check ID VALUE"
   (the call's error record, see tecomp/runtime/abi.py) on standard output and the
   message on standard error, and exits with status 3 without timing.

   The runners of tecomp.runtime build this program for the target and run it there
   (under qemu-user, or over ssh); it reads the library's function table
   (tecomp_module_info, see tecomp/runtime/c_api.py) to find the function. */

#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The table types; the runner writes this header from tecomp.runtime.c_api.ABI_TYPES. */
#include "tecomp_abi.h"

#define MAX_ARGS 256
#define EXIT_CHECK_FAILED 3

static int fail(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "tecomp_run: ");
  fprintf(stderr, fmt, a, b);
  fprintf(stderr, "\n");
  return 2;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads a whole file into a 64-byte aligned buffer (generated code may use aligned
   vector loads on buffers it allocates itself, never assumed of arguments, but aligned
   buffers keep timings comparable with the host's numpy arrays). */
static void *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *buf = NULL;
  if (n < 0 || posix_memalign(&buf, 64, n > 0 ? (size_t)n : 1) != 0) {
    fclose(f);
    return NULL;
  }
  if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *size = (size_t)n;
  return buf;
}

static int write_file(const char *path, const void *buf, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t done = size ? fwrite(buf, 1, size, f) : 0;
  return (fclose(f) == 0 && done == size) ? 0 : -1;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr,
            "usage: tecomp_run LIBRARY FUNCTION [-n NUMBER] [-r REPEAT] [-w WARMUP_MS] "
            "[-s SIZE]... ARGFILE...\n");
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fail("cannot load %s: %s", argv[1], dlerror());
  const tecomp_module_t *mod = (const tecomp_module_t *)dlsym(lib, "tecomp_module_info");
  if (!mod) return fail("%s has no tecomp_module_info (not a tecomp library)%s", argv[1], "");
  if (mod->abi_version != TECOMP_C_ABI_VERSION)
    return fail("%s has another C ABI version than this tecomp_run%s", argv[1], "");
  const tecomp_function *fn = NULL;
  for (int i = 0; i < mod->num_functions; i++)
    if (strcmp(argv[2], "-") == 0 || strcmp(mod->functions[i].name, argv[2]) == 0) {
      fn = &mod->functions[i];
      break;
    }
  if (!fn) return fail("%s has no function %s", argv[1], argv[2]);

  long number = 0, repeat = 1;
  double warmup_ms = 0;
  int64_t sizes[MAX_ARGS + TECOMP_ERROR_RECORD_SLOTS] = {0};
  const char *files[MAX_ARGS];
  int nsizes = 0, nfiles = 0;
  for (int i = 3; i < argc; i++) {
    const char *a = argv[i];
    int has_value = i + 1 < argc;
    if (strcmp(a, "-n") == 0 && has_value) number = atol(argv[++i]);
    else if (strcmp(a, "-r") == 0 && has_value) repeat = atol(argv[++i]);
    else if (strcmp(a, "-w") == 0 && has_value) warmup_ms = atof(argv[++i]);
    else if (strcmp(a, "-s") == 0 && has_value && nsizes < MAX_ARGS)
      sizes[nsizes++] = atoll(argv[++i]);
    else if (nfiles < MAX_ARGS) files[nfiles++] = a;
  }
  if (nfiles != fn->num_params)
    return fail("%s takes one file per buffer parameter; got a different number%s", fn->name, "");
  if (nsizes != fn->num_sizes)
    return fail("%s takes one -s per symbolic size; got a different number%s", fn->name, "");

  void *args[MAX_ARGS];
  size_t bytes[MAX_ARGS];
  for (int i = 0; i < nfiles; i++) {
    args[i] = read_file(files[i], &bytes[i]);
    if (!args[i]) return fail("cannot read %s%s", files[i], "");
  }
  /* The error record follows the size values. */
  int64_t *record = sizes + nsizes;
  record[0] = record[1] = 0;
  int32_t rc = fn->fn(args, sizes);
  if (rc != 0 && rc != TECOMP_CHECK_FAILED)
    return fail("%s: a temporary buffer could not be allocated%s", fn->name, "");
  for (int i = 0; i < nfiles; i++)
    if (fn->params[i].output && write_file(files[i], args[i], bytes[i]) != 0)
      return fail("cannot write %s%s", files[i], "");
  if (rc == TECOMP_CHECK_FAILED) {
    char text[512];
    printf("check %lld %lld\n", (long long)record[0], (long long)record[1]);
    fprintf(stderr, "tecomp_run: %s\n", tecomp_check_message(fn, record, text, sizeof text));
    return EXIT_CHECK_FAILED;
  }

  if (number > 0) {
    double end = now() + warmup_ms * 1e-3;
    while (now() < end) fn->fn(args, sizes);
    for (long r = 0; r < repeat; r++) {
      double t0 = now();
      for (long k = 0; k < number; k++) fn->fn(args, sizes);
      printf("time %.9e\n", (now() - t0) / (double)number);
    }
  }
  for (int i = 0; i < nfiles; i++) free(args[i]);
  return 0;
}
