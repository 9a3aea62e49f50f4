/* `husk serve`: the HTTP API daemon (src/api). */
#ifndef HUSK_CLI_SERVE_H
#define HUSK_CLI_SERVE_H

/* argv[0] is "serve".  Returns the process exit status. */
int cmd_serve(int argc, char **argv);

#endif
