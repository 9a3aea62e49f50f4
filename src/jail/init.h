/* The box's pid 1.  It holds the box open, reaps every orphan, and starts
 * programs on request from the host over the control socket.  It runs as
 * the box user with no capabilities, no_new_privs, Landlock and seccomp (set
 * by the jail before it gets here), is not dumpable (so box code cannot
 * read or write its memory), and handles no signal but SIGCHLD: as pid 1 of
 * its namespace it cannot be killed from inside the box. */
#ifndef HUSK_JAIL_INIT_H
#define HUSK_JAIL_INIT_H

#include <stdbool.h>
#include <stdint.h>

struct init_config {
  int ctl;              /* connected control socket */
  int listen;           /* listening control socket for reconnects, or -1 */
  int fs;               /* root of the box filesystem, handed out on CTL_GET_FS, or -1 */
  int landlock_abi;     /* re-applied per exec as a nested layer */
  bool exit_on_hangup;  /* the first connection closed: end the box (one-shot runs) */
  uint32_t uid, gid;    /* whom programs run as */
  bool writable_root;   /* Landlock lets programs write anywhere in the root */
};

/* Never returns. */
_Noreturn void init_main(const struct init_config *cfg);

#endif
