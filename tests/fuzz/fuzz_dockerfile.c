/* The Dockerfile parser on arbitrary text, with and without build args. */
#include "fuzz.h"
#include "template/dockerfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size ? size : 1);
  if (!text)
    return 0;
  memcpy(text, data, size);
  char *args[] = {"A=1", "B=${A}x", NULL};
  struct dockerfile d;
  struct husk_err err;
  if (dockerfile_parse(text, size, size % 2 ? args : NULL, &d, &err) == 0) {
    /* Every step is whole: its words are C strings. */
    for (size_t i = 0; i < d.n; i++)
      for (size_t k = 0; k < d.steps[i].nargs; k++)
        if (d.steps[i].args[k])
          (void)strlen(d.steps[i].args[k]);
    dockerfile_free(&d);
  }
  free(text);
  return 0;
}
