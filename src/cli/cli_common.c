/* What the command-line commands share (cli_common.h). */
#define _GNU_SOURCE
#include "cli/cli_common.h"

#include <stdbool.h>
#include <sys/stat.h>

const char *cli_default_data_dir(void) {
  struct stat st;
  bool repo = stat("Makefile", &st) == 0 && stat("src/api", &st) == 0 && S_ISDIR(st.st_mode);
  return repo ? "./var/husk" : "/var/lib/husk";
}
