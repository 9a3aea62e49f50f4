#!/bin/bash
# Isolation: environment, identity, filesystem, processes and network of a
# box are its own; nothing of the host shows through and nothing outlives
# the run.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e.bash"
e2e_baseline

# ---- environment -------------------------------------------------------------

export SECRET_TOKEN="e2e-secret-$$-$RANDOM"
export AWS_SECRET_ACCESS_KEY=e2e-aws-secret LD_PRELOAD= HUSK_E2E_HOST_VAR=1
hrun run -- env
check "env: host SECRET_TOKEN does not leak (name)" not grep -q SECRET_TOKEN <<<"$OUT"
check "env: host SECRET_TOKEN does not leak (value)" not grep -qF "$SECRET_TOKEN" <<<"$OUT"
check "env: other host variables do not leak" not grep -qE 'AWS_SECRET|HUSK_E2E_HOST_VAR|LD_PRELOAD' <<<"$OUT"
expect_eq "env: exactly PATH HOME LANG TERM" "$(cut -d= -f1 <<<"$OUT" | sort | tr '\n' ' ')" "HOME LANG PATH TERM "
check "env: HOME=/workspace" grep -qx 'HOME=/workspace' <<<"$OUT"
check "env: PATH includes /usr/bin" grep -qE '^PATH=(.*:)?/usr/bin(:|$)' <<<"$OUT"

hrun run --env FOO=bar --env 'SPACED=a b  c' --env 'EQ=x=y=z' --env EMPTY= -- env
expect_eq "--env: names are the defaults + the added ones" "$(cut -d= -f1 <<<"$OUT" | sort | tr '\n' ' ')" "EMPTY EQ FOO HOME LANG PATH SPACED TERM "
check "--env FOO=bar" grep -qx 'FOO=bar' <<<"$OUT"
check "--env value with spaces" grep -qx 'SPACED=a b  c' <<<"$OUT"
check "--env value with '='" grep -qx 'EQ=x=y=z' <<<"$OUT"
check "--env empty value" grep -qx 'EMPTY=' <<<"$OUT"

hrun run --env HOME=/tmp --env LANG=C --env TERM=dumb -- env
expect_eq "--env overrides defaults: one HOME" "$(grep -c '^HOME=' <<<"$OUT")" 1
check "--env HOME=/tmp overrides" grep -qx 'HOME=/tmp' <<<"$OUT"
check "--env LANG=C overrides" grep -qx 'LANG=C' <<<"$OUT"
check "--env TERM=dumb overrides" grep -qx 'TERM=dumb' <<<"$OUT"

hrun run --env A=1 --env A=2 -- env
expect_eq "--env repeated: the last one wins, once" "$(grep '^A=' <<<"$OUT")" "A=2"

hrun run --env SECRET_TOKEN=given -- sh -c 'echo "$SECRET_TOKEN"'
expect_eq "--env can pass a variable on purpose" "$OUT" given

hrun run --env "MULTI=$(printf 'l1\nl2')" -- python3 -c 'import os; print(repr(os.environ["MULTI"]))'
expect_eq "--env value with a newline" "$OUT" "'l1\\nl2'"

# ---- identity ----------------------------------------------------------------

hrun run -- sh -c 'id -u; id -g; id -G; pwd; hostname; cat /proc/sys/kernel/hostname; echo "$HOME"'
expect_eq "identity: uid 1000, gid 1000, no other group, cwd /workspace, hostname husk, HOME" \
  "$OUT" "$(printf '1000\n1000\n1000\n/workspace\nhusk\nhusk\n/workspace')"

hrun run -w /tmp -- pwd
expect_eq "-w /tmp" "$OUT" /tmp
hrun run --workdir /workspace/a/b -- pwd
expect_eq "--workdir /workspace/a/b (created)" "$OUT" /workspace/a/b

hrun run -- sh -c 'ls /proc | grep -c "^[0-9]"'
check "pid namespace: only the box's few processes are visible ($OUT)" [ "${OUT:-99}" -le 5 ]
hrun run -- sh -c 'echo $$'
check "pid namespace: the program has a small pid ($OUT)" [ "${OUT:-99}" -le 5 ]

# ---- filesystem --------------------------------------------------------------

marker_root=
if [ -d /root ] && [ -w /root ]; then
  marker_root=/root/.husk-e2e-marker-$$
  echo host >"$marker_root"
fi
hrun run -- sh -c '
test -e /etc/shadow && echo shadow-visible
test -e /etc/gshadow && echo gshadow-visible
for d in /root /home; do
  [ -e "$d" ] && [ -n "$(ls -A "$d")" ] && echo "$d-has-content"
done
test -e /work && echo work-visible
exit 0'
[ -n "$marker_root" ] && rm -f "$marker_root"
expect_eq "fs: no /etc/shadow, no host /root or /home, no /work" "$RC/$OUT" "0/"

hrun run -- test -e "$T_SCRATCH"
expect_eq "fs: the host's /tmp is not the box's /tmp" "$RC" 1

hrun run -- sh -c 'touch /usr/e2e-x 2>&1; echo rc=$?'
check "fs: /usr is read-only (EROFS)" grep -q 'Read-only file system' <<<"$OUT"
hrun run -- sh -c 'test -x /usr/bin/env && test -x /usr/bin/python3 && echo host-usr'
expect_eq "fs: /usr is the host's" "$OUT" host-usr

hrun run -- sh -c '
touch /e2e-x 2>/dev/null && echo root-writable
mkdir /e2e-d 2>/dev/null && echo root-mkdir
echo x >/etc/passwd 2>/dev/null && echo etc-writable
touch /etc/e2e-x 2>/dev/null && echo etc-create
touch /bin/e2e-x 2>/dev/null && echo bin-writable
touch /dev/e2e-x 2>/dev/null && echo dev-writable
exit 0'
expect_eq "fs: writes to /, /etc, /bin, /dev fail" "$RC/$OUT" "0/"

hrun run -- sh -c 'echo a >/workspace/f && echo b >/tmp/f && echo c >/dev/shm/f && cat /workspace/f /tmp/f /dev/shm/f'
expect_eq "fs: /workspace, /tmp, /dev/shm are writable" "$OUT" "$(printf 'a\nb\nc')"

hrun run -- sh -c 'echo left-behind >/workspace/persist; echo x >/tmp/persist; echo y >/dev/shm/persist'
hrun run -- sh -c 'ls -A /workspace /tmp /dev/shm; cat /workspace/persist /tmp/persist /dev/shm/persist 2>/dev/null; exit 0'
check "fs: files of one box are not in the next" not grep -q persist <<<"$OUT"

# Two boxes at once see nothing of each other.
held_start "$T_SCRATCH/boxa" run --timeout 60 -- python3 -c '
import os, socket, sys
open("/workspace/box-a", "w").write("a"); open("/tmp/box-a", "w").write("a"); open("/dev/shm/box-a", "w").write("a")
u = socket.socket(socket.AF_UNIX); u.bind("\0husk-e2e-box-a"); u.listen(1)
t = socket.socket(); t.bind(("127.0.0.1", 0)); t.listen(1)
print(open("/proc/self/uid_map").read().split()[1], t.getsockname()[1], flush=True)
sys.stdin.read()'
wait_for_output "$T_SCRATCH/boxa"
read -r A_BASE A_PORT <"$T_SCRATCH/boxa"
check "two boxes: box A is up (sanity)" [ -n "$A_PORT" ]
hrun run -- python3 -c "
import os, socket
print(open('/proc/self/uid_map').read().split()[1])
for p in ('/workspace/box-a', '/tmp/box-a', '/dev/shm/box-a'):
    if os.path.exists(p): print('SEES', p)
for fam, addr in ((socket.AF_UNIX, '\0husk-e2e-box-a'), (socket.AF_INET, ('127.0.0.1', ${A_PORT:-1}))):
    s = socket.socket(fam); s.settimeout(3)
    try:
        s.connect(addr); print('CONNECTED', addr)
    except OSError:
        pass
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            if 'python3' in open('/proc/%s/cmdline' % pid).read() and int(pid) != os.getpid(): print('SEES python3', pid)
        except OSError:
            pass"
B_BASE=$(head -n 1 <<<"$OUT")
check "two boxes: different host uid ranges ($A_BASE, $B_BASE)" [ -n "$B_BASE" -a "$A_BASE" != "$B_BASE" ]
expect_eq "two boxes: B sees none of A's files, sockets or processes" "$(tail -n +2 <<<"$OUT")" ""
held_end
expect_eq "two boxes: A ends at EOF on its stdin" "$HELD_RC" 0

# ---- network -----------------------------------------------------------------

python3 -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 0)); s.listen(8)
u = socket.socket(socket.AF_UNIX); u.bind("\0husk-e2e-%d" % s.getsockname()[1]); u.listen(8)
print(s.getsockname()[1], flush=True)
time.sleep(120)' >"$T_SCRATCH/port" &
LISTENER=$!
bg_track "$LISTENER"
for ((i = 0; i < 100; i++)); do [ -s "$T_SCRATCH/port" ] && break; sleep 0.05; done
PORT=$(cat "$T_SCRATCH/port")
check "network: host listener is up (sanity)" python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 3)"

hrun run -- python3 -c "
import socket
for fam, addr in ((socket.AF_INET, ('127.0.0.1', $PORT)), (socket.AF_UNIX, '\0husk-e2e-$PORT')):
    s = socket.socket(fam); s.settimeout(3)
    try:
        s.connect(addr); print('CONNECTED', addr)
    except OSError as e:
        print('refused', e.errno)"
check "network: host 127.0.0.1:$PORT unreachable from the box" not grep -q "CONNECTED ('127" <<<"$OUT"
check "network: host abstract unix socket unreachable from the box" not grep -q "CONNECTED .*husk-e2e" <<<"$OUT"
expect_eq "network: both connections failed" "$(grep -c '^refused' <<<"$OUT")" 2
kill "$LISTENER" 2>/dev/null
wait "$LISTENER" 2>/dev/null

hrun run -- sh -c 'tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " "'
expect_eq "network: only lo in /proc/net/dev" "$OUT" lo

# The way out is looked for in the routing tables, never tried: IPv4's main
# table is empty and IPv6's routes all go through lo.
hrun run -- sh -c 'tail -n +2 /proc/net/route | wc -l; [ -e /proc/net/ipv6_route ] && awk "\$NF != \"lo\"" /proc/net/ipv6_route | wc -l || echo 0'
expect_eq "network: no route out of the box" "$(echo $OUT)" "0 0"

hrun run -- python3 -c '
import socket
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
c = socket.create_connection(l.getsockname(), 3); a, _ = l.accept()
c.sendall(b"ping"); a.sendall(a.recv(4).upper()); print(c.recv(4).decode())'
expect_eq "network: the box can listen and connect on its own loopback" "$OUT" PING

# A listener inside the box is not reachable from the host.
held_start "$T_SCRATCH/boxport" run --timeout 60 -- python3 -c '
import socket, sys
l = socket.socket(); l.bind(("127.0.0.1", 0)); l.listen(1)
print(l.getsockname()[1], flush=True); sys.stdin.read()'
wait_for_output "$T_SCRATCH/boxport"
BPORT=$(cat "$T_SCRATCH/boxport")
check "network: the box's listener is up (sanity)" [ -n "$BPORT" ]
check "network: the box's listener on $BPORT is unreachable from the host" \
  not python3 -c "import socket; socket.create_connection(('127.0.0.1', ${BPORT:-1}), 2)"  2>/dev/null
held_end

e2e_global_clean "global"
finish
