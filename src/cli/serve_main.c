/* build/husk-serve: the daemon's own binary.  `husk serve` execs it, so
 * that the one-shot `husk run` does not load the server's libraries
 * (libmicrohttpd, SQLite, OpenSSL, libarchive): dynamic linking of those
 * alone took about 6 ms of every run (docs/performance.md). */
#include "cli/serve.h"

int main(int argc, char **argv) {
  return cmd_serve(argc, argv);
}
