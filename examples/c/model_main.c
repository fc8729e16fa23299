/* Runs a whole model exported by tecomp, without Python: model.so holds the kernels, the
   weights and the entry point tecomp_model_run; model.h (lib.export_header) declares it.

   usage: model_demo OUT_PREFIX INPUT.bin SHAPE [INPUT.bin SHAPE ...]

   One INPUT.bin (raw C-contiguous array) and SHAPE ("3,3,16,16") per model input, in the
   order tecomp_model_info lists them. The program asks the model for the output shapes
   (which also checks the input shapes), reads the inputs, runs the model once and writes
   output k to OUT_PREFIX<k>.bin, printing each output's name and shape. */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

static size_t elements(const int64_t *shape, int32_t ndim) {
  size_t n = 1;
  for (int32_t d = 0; d < ndim; d++) n *= (size_t)shape[d];
  return n;
}

static int64_t *parse_shape(const char *text, const tecomp_param *p) {
  int64_t *shape = calloc((size_t)p->ndim + 1, sizeof(int64_t));
  const char *c = text;
  for (int32_t d = 0; d < p->ndim; d++) {
    char *end;
    shape[d] = strtoll(c, &end, 10);
    if (end == c || *end != (d + 1 < p->ndim ? ',' : '\0')) {
      fprintf(stderr, "input %s: shape \"%s\" is not %d comma-separated sizes\n", p->name,
              text, (int)p->ndim);
      exit(2);
    }
    c = end + 1;
  }
  return shape;
}

static void *read_input(const char *path, size_t bytes) {
  void *buf = malloc(bytes ? bytes : 1);
  FILE *f = fopen(path, "rb");
  if (!buf || !f || fread(buf, 1, bytes, f) != bytes || fgetc(f) != EOF) {
    fprintf(stderr, "%s does not hold exactly %zu bytes\n", path, bytes);
    exit(1);
  }
  fclose(f);
  return buf;
}

static const char *describe(int32_t rc) {
  if (rc == TECOMP_MODEL_ESHAPE) return "the input shapes do not fit the model";
  if (rc == TECOMP_MODEL_ENOMEM) return "out of memory";
  return "unknown error";
}

int main(int argc, char **argv) {
  const tecomp_model_t *m = &tecomp_model_info;
  if (argc != 2 + 2 * m->num_inputs) {
    fprintf(stderr, "usage: %s OUT_PREFIX", argv[0]);
    for (int32_t i = 0; i < m->num_inputs; i++) fprintf(stderr, " %s.bin SHAPE", m->inputs[i].name);
    fprintf(stderr, "\n");
    return 2;
  }
  const void **inputs = calloc((size_t)m->num_inputs, sizeof(void *));
  const int64_t **input_shapes = calloc((size_t)m->num_inputs, sizeof(int64_t *));
  void **outputs = calloc((size_t)m->num_outputs, sizeof(void *));
  int64_t **output_shapes = calloc((size_t)m->num_outputs, sizeof(int64_t *));
  for (int32_t i = 0; i < m->num_inputs; i++)
    input_shapes[i] = parse_shape(argv[3 + 2 * i], &m->inputs[i]);
  for (int32_t k = 0; k < m->num_outputs; k++)
    output_shapes[k] = calloc((size_t)m->outputs[k].ndim + 1, sizeof(int64_t));

  int32_t rc = tecomp_model_output_shapes(input_shapes, output_shapes);
  if (rc != TECOMP_MODEL_OK) {
    fprintf(stderr, "model %s: error %d: %s\n", m->name, rc, describe(rc));
    return 1;
  }
  for (int32_t i = 0; i < m->num_inputs; i++)
    inputs[i] = read_input(argv[2 + 2 * i],
                           elements(input_shapes[i], m->inputs[i].ndim) * m->inputs[i].itemsize);
  for (int32_t k = 0; k < m->num_outputs; k++)
    outputs[k] = malloc(elements(output_shapes[k], m->outputs[k].ndim) * m->outputs[k].itemsize + 1);

  rc = tecomp_model_run(inputs, input_shapes, outputs, output_shapes);
  if (rc != TECOMP_MODEL_OK) {
    fprintf(stderr, "model %s: error %d: %s\n", m->name, rc, describe(rc));
    return 1;
  }
  for (int32_t k = 0; k < m->num_outputs; k++) {
    const tecomp_param *p = &m->outputs[k];
    char path[4096];
    snprintf(path, sizeof path, "%s%d.bin", argv[1], (int)k);
    FILE *f = fopen(path, "wb");
    size_t n = elements(output_shapes[k], p->ndim);
    if (!f || fwrite(outputs[k], p->itemsize, n, f) != n || fclose(f) != 0) {
      fprintf(stderr, "cannot write %s\n", path);
      return 1;
    }
    printf("output %d %s: %s[", (int)k, p->name, p->dtype);
    for (int32_t d = 0; d < p->ndim; d++)
      printf("%s%" PRId64, d ? ", " : "", output_shapes[k][d]);
    printf("] -> %s\n", path);
  }
  return 0;
}
