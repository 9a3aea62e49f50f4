#!/bin/bash
# The box spawner (src/box/spawner.h): the daemon runs the small `husk`
# binary installed next to it as the spawner, so every box's init is a copy
# of that binary, not of the daemon; a missing `husk`, or one that is not of
# the same build, is never trusted: the daemon falls back to its own binary.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

BIN=$(dirname "$HUSK")
init_exe() { # BOX: the executable of the box's init, as the host sees it
  local p
  for p in $(box_pids "$1"); do
    case "$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" in
    "husk-init "*) readlink "/proc/$p/exe" && return 0 ;;
    esac
  done
  return 1
}
one_box() { # NAME: a tenant, a box, a command in it
  new_tenant "$1" || return 1
  KEY=$TKEY
  new_box '{}' || return 1
  api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["echo","ran"]}'
  [ "$(jf 'j["stdout"]')" = ran ]
}

# 1. The normal installation: husk next to husk-serve.
if serve_start; then
  check "a box runs commands" one_box spawnA
  expect_eq "its init is the small husk binary" "$(init_exe "$BOX")" "$(readlink -f "$BIN/husk")"
  api DELETE "/v1/sandboxes/$BOX"
  serve_stop
else
  not_ok "the daemon starts"
fi

# 2. husk-serve alone (no husk next to it): its own binary is the spawner.
ALONE=$T_SCRATCH/alone
mkdir -p "$ALONE"
cp "$BIN/husk-serve" "$ALONE/husk-serve"
printf '#!/bin/sh\nshift\nexec "%s/husk-serve" "$@"\n' "$ALONE" >"$ALONE/start"
chmod +x "$ALONE/start"
SAVED=$HUSK
HUSK=$ALONE/start
DATA=$T_SCRATCH/data2
if serve_start; then
  check "without husk next to it: a box runs commands" one_box spawnB
  expect_eq "without husk next to it: init is the daemon's own binary" "$(init_exe "$BOX")" "$ALONE/husk-serve"
  api DELETE "/v1/sandboxes/$BOX"
  serve_stop
else
  not_ok "the daemon starts without husk next to it"
fi

# 3. A `husk` next to it that is not a spawner of this build (here: a
#    script that says something else and lingers): refused, killed, and
#    the daemon's own binary is used.
printf '#!/bin/sh\necho not-a-spawner >&3\nexec sleep 1000\n' >"$ALONE/husk"
chmod +x "$ALONE/husk"
DATA=$T_SCRATCH/data3
if serve_start; then
  check "with a foreign husk next to it: a box runs commands" one_box spawnC
  expect_eq "with a foreign husk next to it: init is the daemon's own binary" "$(init_exe "$BOX")" "$ALONE/husk-serve"
  check "the foreign husk was killed" not pgrep -x -f "sleep 1000"
  api DELETE "/v1/sandboxes/$BOX"
  serve_stop
else
  not_ok "the daemon starts with a foreign husk next to it"
fi
HUSK=$SAVED
serve_finish
