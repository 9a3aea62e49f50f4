# Helpers of the template suites (sourced after tests/lib.sh).
#
#   TDATA         the suite's data directory (templates, database)
#   tpl ARGS...   husk template ARGS --data $TDATA; output in $OUT, $ERR, $RC
#   run_tpl ARGS  husk run --data $TDATA ARGS; likewise
#   mkimage OUT ARGS...   tests/template/mkimage.py
#   busybox_root DIR      a minimal userland in DIR: busybox, sh and friends,
#                         /etc/passwd with root and app (1000)
#   tpl_layers    how many layers the store holds

TDATA=$T_SCRATCH/data
TROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
MKIMAGE=$TROOT/tests/template/mkimage.py

tpl() {
  "$HUSK" template "$@" --data "$TDATA" >"$T_SCRATCH/out" 2>"$T_SCRATCH/err" </dev/null
  RC=$?
  OUT=$(cat "$T_SCRATCH/out")
  ERR=$(cat "$T_SCRATCH/err")
}

run_tpl() {
  "$HUSK" run --data "$TDATA" "$@" >"$T_SCRATCH/out" 2>"$T_SCRATCH/err" </dev/null
  RC=$?
  OUT=$(cat "$T_SCRATCH/out")
  ERR=$(cat "$T_SCRATCH/err")
}

mkimage() {
  python3 "$MKIMAGE" "$@"
}

busybox_root() {
  local d=$1 c
  mkdir -p "$d/bin" "$d/etc" "$d/home/app" "$d/tmp"
  cp /bin/busybox "$d/bin/busybox"
  for c in sh ls cat echo id env pwd touch mkdir rm whoami sleep stat wc head grep tr; do
    ln -sf busybox "$d/bin/$c"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n' >"$d/etc/passwd"
  printf 'root:x:0:\napp:x:1000:\n' >"$d/etc/group"
}

tpl_layers() {
  find "$TDATA/templates/layers" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | wc -l
}

have_busybox() { [ -x /bin/busybox ] && /bin/busybox true 2>/dev/null; }
