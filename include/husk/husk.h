/* husk: a disposable, isolated computer for AI agents -- the C library.
 *
 *   #include <husk/husk.h>     everything below
 *   pkg-config --cflags --libs husk
 *
 *   husk/base.h     errors, the log callback, the version, HUSK_PUBLIC
 *   husk/run.h      one program in a fresh box (husk_run), limits
 *   husk/manager.h  the manager of long-lived boxes, tenants
 *   husk/box.h      boxes: create, get, list, end, lifetime, network, secrets
 *   husk/exec.h     commands in a box: to completion, streaming, background
 *   husk/files.h    a box's files and trees
 *   husk/template.h templates: import, get, list, delete, export
 *   husk/context.h  code contexts: stateful interpreters with rich results
 *   husk/snapshot.h filesystem snapshots, and boxes made from them
 *
 * Every function that takes a `struct husk_err` returns a negative value
 * on failure and fills it (husk/base.h); 0 or more is success (some
 * return a count: each says so).  husk_run is the exception: it returns
 * the program's exit status and reports failures in its result.  The
 * void functions release what others returned and cannot fail.  The
 * calls that build or enter boxes need root.  examples/ holds a complete
 * program. */
#ifndef HUSK_HUSK_H
#define HUSK_HUSK_H

#include "husk/base.h"
#include "husk/box.h"
#include "husk/exec.h"
#include "husk/files.h"
#include "husk/manager.h"
#include "husk/run.h"
#include "husk/template.h"
#include "husk/context.h"
#include "husk/snapshot.h"
#include "husk/volume.h"
#include "husk/preview.h"
#include "husk/fetch.h"

#endif
