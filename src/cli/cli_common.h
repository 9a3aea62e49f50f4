/* What the command-line commands share. */
#ifndef HUSK_CLI_CLI_COMMON_H
#define HUSK_CLI_CLI_COMMON_H

/* The data directory when --data is not given: ./var/husk from the source
 * tree (make run, the tests), else /var/lib/husk. */
const char *cli_default_data_dir(void);

/* `husk template ...` (src/cli/template.c); argv[0] is "template". */
int cmd_template(int argc, char **argv);

/* `husk snapshot ...` (src/cli/snapshot.c); argv[0] is "snapshot". */
int cmd_snapshot(int argc, char **argv);
/* `husk user ...` (src/cli/user.c); argv[0] is "user". */
int cmd_user(int argc, char **argv);

#endif
