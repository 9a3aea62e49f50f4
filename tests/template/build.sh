#!/bin/bash
# Dockerfile builds from the command line: RUN steps in boxes (as the
# image's user, in its working directory, with ENV and ARGs), COPY from the
# context, the config instructions honoured, steps cached and a changed
# file or line redoing only what follows it, a failing RUN reported with
# its output, a COPY of a symlink leading out of the context refused, no
# network for a step without a policy, and a SIGKILLed build leaving no
# template, no box and no work behind.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/template.bash"

if ! have_busybox; then
  not_ok "busybox is installed (scripts/deps.sh test installs busybox-static)"
  finish
  exit 1
fi
L=$T_SCRATCH/layers
busybox_root "$L/base"
echo base >"$L/base/etc/motd"
mkimage "$T_SCRATCH/base.tar" --layer "$L/base" --owner home/app=1000:1000
tpl import "$T_SCRATCH/base.tar" --name base
expect_eq "the base image" "$RC" 0

C=$T_SCRATCH/ctx
mkdir -p "$C/sub"
echo "from the context" >"$C/hello.txt"
echo sub >"$C/sub/x"
ln -s /etc/passwd "$C/evil"
ln -s hello.txt "$C/inside"
cat >"$C/Dockerfile" <<'EOF'
FROM base
ARG WHO=nobody
ENV STAGE=one
WORKDIR /opt/app
COPY hello.txt sub ./
COPY inside /opt/app/via-link
RUN echo "built by $WHO in $(pwd) as $(id -u)" > built.txt && rm /etc/motd
USER app
RUN echo "second as $(id -un)" > /home/app/second.txt
LABEL purpose=test
CMD ["sh", "-c", "cat /opt/app/built.txt /opt/app/hello.txt /opt/app/x /opt/app/via-link /home/app/second.txt; test -e /etc/motd || echo no-motd; echo $STAGE"]
EOF
build() { # NAME ARGS...: husk template build -f $C/Dockerfile --name NAME ARGS $C
  local name=$1
  shift
  "$HUSK" template build -f "$C/Dockerfile" --name "$name" --data "$TDATA" "$@" "$C" \
    >"$T_SCRATCH/build.out" 2>"$T_SCRATCH/build.err"
  RC=$?
  OUT=$(cat "$T_SCRATCH/build.out")
  ERR=$(cat "$T_SCRATCH/build.err")
}
build app --build-arg WHO=tester
expect_eq "a Dockerfile builds ($(tail -n 1 <<<"$ERR"))" "$RC" 0
check "its steps are shown as they run" grep -q '^step 7: RUN' <<<"$OUT"
run_tpl --template app
expect_eq "the built template runs its CMD; RUN, COPY, ENV, ARG, WORKDIR and USER were honoured" \
  "$OUT" $'built by tester in /opt/app as 0\nfrom the context\nsub\nfrom the context\nsecond as app\nno-motd\none'
run_tpl --template app -- id -un
expect_eq "USER is the template's user" "$OUT" app
tpl inspect app
check "LABEL is in its config" grep -q '"purpose": "test"' <<<"$OUT"

tpl rm app
sleep 1.1 # a later second: file times in the context's layer must not change its key
build app --build-arg WHO=tester
check "a rebuild takes both RUN steps from the cache" \
  [ "$(grep -c '(cached)$' <<<"$OUT")" = 2 ]
echo "changed" >>"$C/hello.txt"
tpl rm app
build app --build-arg WHO=tester
check "a changed context file redoes the steps after its COPY" \
  [ "$(grep -c '(cached)$' <<<"$OUT")" = 0 ]
sed -i 's/^USER app$/USER 1000/' "$C/Dockerfile"
tpl rm app
build app --build-arg WHO=tester
check "a changed line redoes only what follows it" \
  bash -c 'grep -q "step 7: .*(cached)$" <<<"$1" && ! grep -q "step 9: .*(cached)$" <<<"$1"' _ "$OUT"
tpl rm app
build app --build-arg WHO=tester --no-cache
check "--no-cache runs every step" [ "$(grep -c '(cached)$' <<<"$OUT")" = 0 ]

cat >"$C/Dockerfile.fail" <<'EOF'
FROM base
RUN echo "the step's own words" && exit 3
EOF
"$HUSK" template build -f "$C/Dockerfile.fail" --name failed --data "$TDATA" "$C" \
  >"$T_SCRATCH/f.out" 2>"$T_SCRATCH/f.err"
RC=$?
check "a failing RUN fails the build" [ "$RC" -ne 0 ]
check "with the step's output" grep -q "the step's own words" "$T_SCRATCH/f.out"
check "and its number and exit code" grep -q "step 2 .*exit code 3" "$T_SCRATCH/f.err"
tpl list
check "and no template" bash -c '! grep -q "^failed " <<<"$1"' _ "$OUT"

printf 'FROM base\nCOPY evil /x\n' >"$C/Dockerfile.evil"
"$HUSK" template build -f "$C/Dockerfile.evil" --name evil --data "$TDATA" "$C" \
  >/dev/null 2>"$T_SCRATCH/e.err"
check "COPY of a symlink leading out of the context is refused: $(cat "$T_SCRATCH/e.err")" \
  grep -q "leads out of the build context" "$T_SCRATCH/e.err"
printf 'FROM base\nCOPY ../outside /x\n' >"$C/Dockerfile.up"
"$HUSK" template build -f "$C/Dockerfile.up" --name up --data "$TDATA" "$C" \
  >/dev/null 2>"$T_SCRATCH/u.err"
check "and of a path above it" grep -q "leads out of the build context" "$T_SCRATCH/u.err"
printf 'FROM base\nHEALTHCHECK CMD true\n' >"$C/Dockerfile.bad"
"$HUSK" template build -f "$C/Dockerfile.bad" --name bad --data "$TDATA" "$C" \
  >/dev/null 2>"$T_SCRATCH/b.err"
check "an instruction husk does not build is refused with its line" grep -q "line 2" "$T_SCRATCH/b.err"

# Without an egress policy a step has no network: only its loopback.
printf 'FROM base\nRUN ls /sys/class/net 2>/dev/null; cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d " " > /ifaces\n' \
  >"$C/Dockerfile.net"
"$HUSK" template build -f "$C/Dockerfile.net" --name net --data "$TDATA" "$C" >/dev/null 2>&1
run_tpl --template net -- cat /ifaces
expect_eq "a step without an egress policy has only its loopback" "$OUT" lo

# ADD: a local tar archive, plain or compressed, is unpacked into the
# destination (its owners kept, or --chown's); any other file is copied,
# as COPY does; a hostile archive is refused with nothing written.
mkdir -p "$T_SCRATCH/tree/dir"
echo "from the archive" >"$T_SCRATCH/tree/dir/f"
tar -C "$T_SCRATCH/tree" --owner=1234 --group=1234 --numeric-owner -cf "$C/tree.tar" dir
gzip -c "$C/tree.tar" >"$C/tree.tar.gz"
bzip2 -c "$C/tree.tar" >"$C/tree.tar.bz2"
xz -c "$C/tree.tar" >"$C/tree.tar.xz"
zstd -q -c "$C/tree.tar" >"$C/tree.tar.zst"
echo "not an archive" >"$C/note.tar"
cat >"$C/Dockerfile.add" <<'EOF'
FROM base
ADD tree.tar.gz /a/gz/
ADD tree.tar.bz2 /a/bz2
ADD tree.tar.xz tree.tar.zst /a/multi/
ADD tree.tar /a/plain/
ADD note.tar /a/note.tar
ADD --chown=1000:1000 tree.tar /a/owned/
COPY tree.tar /a/copied.tar
CMD ["sh", "-c", "cat /a/gz/dir/f /a/bz2/dir/f /a/multi/dir/f /a/plain/dir/f /a/note.tar; stat -c %u /a/plain/dir/f /a/owned/dir/f; test -f /a/copied.tar && echo copied"]
EOF
"$HUSK" template build -f "$C/Dockerfile.add" --name added --data "$TDATA" "$C" \
  >"$T_SCRATCH/a.out" 2>"$T_SCRATCH/a.err"
expect_eq "ADD builds ($(tail -n 1 "$T_SCRATCH/a.err"))" "$?" 0
run_tpl --template added
expect_eq "ADD unpacks plain, gzip, bzip2, xz and zstd tars, copies other files; COPY never unpacks" \
  "$OUT" $'from the archive\nfrom the archive\nfrom the archive\nfrom the archive\nnot an archive\n1234\n1000\ncopied'
python3 - "$C/evil.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    i = tarfile.TarInfo("ok"); i.size = 2; t.addfile(i, io.BytesIO(b"ok"))
    i = tarfile.TarInfo("link"); i.type = tarfile.SYMTYPE; i.linkname = "/"; t.addfile(i)
    i = tarfile.TarInfo("link/add-escape-canary"); i.size = 4; t.addfile(i, io.BytesIO(b"evil"))
EOF
python3 - "$C/climb.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    i = tarfile.TarInfo("../../add-escape-canary"); i.size = 4; t.addfile(i, io.BytesIO(b"evil"))
EOF
for a in evil climb; do
  printf 'FROM base\nADD %s.tar /x/\n' "$a" >"$C/Dockerfile.$a"
  "$HUSK" template build -f "$C/Dockerfile.$a" --name "add-$a" --data "$TDATA" "$C" \
    >/dev/null 2>"$T_SCRATCH/$a.err"
  check "ADD of a hostile archive ($a) is refused, naming it: $(cat "$T_SCRATCH/$a.err")" \
    grep -q "the archive \`$a.tar\`" "$T_SCRATCH/$a.err"
done
check "and nothing was written outside the destination" \
  bash -c '[ ! -e /add-escape-canary ] && [ -z "$(find "$1" -name add-escape-canary 2>/dev/null)" ]' _ "$T_SCRATCH"
printf 'FROM base\nADD --chown=app tree.tar /x/\n' >"$C/Dockerfile.names"
"$HUSK" template build -f "$C/Dockerfile.names" --name add-names --data "$TDATA" "$C" \
  >/dev/null 2>"$T_SCRATCH/n.err"
check "--chown with a name says it takes numbers" grep -q "numeric ids" "$T_SCRATCH/n.err"

# A SIGKILLed build: no template, no box left, the work gone next time.
cat >"$C/Dockerfile.slow" <<'EOF'
FROM base
RUN sleep 30
EOF
step_running() { [ -n "$(ps -e -o uid=,args= | awk '$1 >= 1073741824 && /sleep 30/')" ]; }
"$HUSK" template build -f "$C/Dockerfile.slow" --name slow --data "$TDATA" "$C" >/dev/null 2>&1 &
bp=$!
for _ in $(seq 150); do
  step_running && break
  sleep 0.1
done
check "the slow step was running" step_running
kill -9 "$bp"
wait "$bp" 2>/dev/null
tpl list
check "a SIGKILLed build is no template" bash -c '! grep -q "^slow " <<<"$1"' _ "$OUT"
check "its work is gone once the store is opened again" [ -z "$(ls -A "$TDATA/templates/tmp")" ]
# Its step's box is left to the next manager of the data directory, which
# ends it (its metadata says husk.build) instead of adopting it.
build again --build-arg WHO=tester
expect_eq "the next build on the data directory works" "$RC" 0
for _ in $(seq 100); do
  step_running || break
  sleep 0.1
done
no_step() { ! step_running; }
check "no step box of the killed build is left running" no_step
finish
