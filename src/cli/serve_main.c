/* build/husk-serve: the daemon's own binary.  `husk serve` execs it, so
 * that the one-shot `husk run` does not load the server's libraries
 * (libmicrohttpd, SQLite, OpenSSL, libarchive): dynamic linking of those
 * alone took about 6 ms of every run (docs/performance.md). */
#include <string.h>

#include "box/spawner.h"
#include "cli/serve.h"

int main(int argc, char **argv) {
  /* The daemon re-executes itself under this name as its box spawner. */
  if (argc >= 1 && !strcmp(argv[0], HUSK_SPAWNER_ARGV0))
    return spawner_main(3, argc > 1 ? argv[1] : NULL);
  return cmd_serve(argc, argv);
}
