/* Private to src/box/box*.c: the in-memory side of long-lived boxes. */
#ifndef HUSK_BOX_INTERNAL_H
#define HUSK_BOX_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "box/box.h"
#include "jail/jail.h"
#include "state/state.h"

struct bgproc {
  struct bgproc *next;
  int64_t pid;
  uint64_t exec_id;
  int conn;    /* the control connection that started it (monitor reads EXITED), -1 after */
  int stdin_w; /* write end of its stdin pipe, -1 once closed */
};

struct live_box {
  struct live_box *next;
  int refs;        /* under mgr->lock */
  bool listed;     /* in mgr->boxes */
  pthread_mutex_t lock; /* serialises lifecycle changes and bgproc list */
  atomic_bool ending; /* destroy started: no new work */
  char id[STATE_BOX_ID_SIZE];
  char tenant[STATE_TENANT_ID_SIZE];
  struct jail j;
  char ctl_path[PATH_MAX];
  char **env;      /* NAME=VALUE, NULL-terminated, owned */
  struct husk_limits limits;
  int64_t expires_ms;
  struct bgproc *procs;
  uint64_t next_exec_id;
};

struct box_mgr {
  struct box_mgr_config cfg;
  char data_dir[PATH_MAX];
  pthread_mutex_t lock;
  struct live_box *boxes;
  pthread_t monitor;
  bool monitor_running;
  atomic_bool stop;
  int wake[2]; /* written to when the set of things to watch changes */
  struct spawner *spawner; /* creates boxes from a clean single-threaded process */
  int dir_lock;            /* flock on DATA/husk.lock: one daemon per data directory */
};

/* box.c */
void box_log(struct box_mgr *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void box_wake_monitor(struct box_mgr *m);
char **box_env_from_json(const char *s);
void box_env_free(char **env);
struct live_box *lb_new(void);
void lb_free(struct box_mgr *m, struct live_box *b);
void lb_unref(struct box_mgr *m, struct live_box *b);
struct live_box *lb_get(struct box_mgr *m, const char *tenant, const char *id);
void lb_list_add(struct box_mgr *m, struct live_box *b);
bool box_valid_id(const char *id);
uint64_t box_proc_start_time(pid_t pid);
int box_ctl_path(struct box_mgr *m, const char *id, char *out, size_t len, struct husk_err *err);
int box_end(struct box_mgr *m, struct live_box *b, const char *state, const char *reason,
            struct husk_err *err);
struct live_box *box_running(struct box_mgr *m, const char *tenant, const char *id,
                             struct husk_err *err);
int box_check_exec(const struct box_exec_req *req, struct husk_err *err);
void bgproc_free_all(struct live_box *b);

/* box_monitor.c */
void *box_monitor_main(void *arg);
void box_reconcile(struct box_mgr *m);

#endif
