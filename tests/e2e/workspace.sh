#!/bin/bash
# --workspace DIR (copied into /workspace before the run) and --export DIR
# (/workspace copied out after it), including hostile content: symlinks are
# copied as symlinks and never followed, nothing is written outside DIR,
# special files are skipped with a warning, sparse files stay sparse,
# hardlinks stay hardlinks.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e.bash"
e2e_baseline

S=$T_SCRATCH
TB=1099511627776

# tree_state DIR [SKIP]: a listing of everything under DIR but DIR/SKIP
# (type, mode, size, link target, content hash of files under 64M), to
# prove a directory was not touched.
tree_state() {
  python3 - "$1" "${2:-}" <<'PY'
import hashlib, os, stat, sys
root, skip = sys.argv[1], sys.argv[2]
for d, dirs, files in os.walk(root):
    rel = os.path.relpath(d, root)
    if rel == "." and skip in dirs:
        dirs.remove(skip)
    dirs.sort()
    for n in sorted(dirs + files) + ["."]:
        p = os.path.join(d, n)
        st = os.lstat(p)
        line = [repr(os.path.normpath(os.path.join(rel, n))), oct(st.st_mode), str(st.st_size)]
        if stat.S_ISLNK(st.st_mode):
            line.append(repr(os.readlink(p)))
        elif stat.S_ISREG(st.st_mode) and st.st_size < (64 << 20):
            line.append(hashlib.sha256(open(p, "rb").read()).hexdigest())
        print(" ".join(line))
PY
}

# ---- copy-in -------------------------------------------------------------------

IN=$S/in
mkdir -p "$IN/sub/deeper" "$IN/emptydir"
echo "hello from the host" >"$IN/file.txt"
echo nested >"$IN/sub/deeper/nested.txt"
printf '#!/bin/sh\necho script-ran\n' >"$IN/run.sh"
chmod 0755 "$IN/run.sh"
echo "host-secret-$$" >"$S/secret.txt"
ln -s /etc/shadow "$IN/shadowlink"
ln -s "$S/secret.txt" "$IN/secretlink"
ln -s file.txt "$IN/rel"
ln "$IN/file.txt" "$IN/file-hardlink"
mkfifo "$IN/hostfifo"
truncate -s 1T "$IN/sparse1t"
printf 'x' >"$IN/$(printf 'new\nline')"
in_state=$(tree_state "$IN")

hrun run --json --disk 64M --workspace "$IN" -- sh -c '
cat file.txt sub/deeper/nested.txt
./run.sh
test -d emptydir && echo emptydir-ok
test -L shadowlink && echo "shadowlink -> $(readlink shadowlink)"
cat shadowlink 2>/dev/null && echo SHADOW-READ
test -L secretlink && echo secretlink-is-link
cat secretlink 2>/dev/null && echo SECRET-READ
test -L rel && cat rel
stat -c %s sparse1t
test -e hostfifo && echo fifo-copied
test "$(cat "$(printf "new\nline")")" = x && echo newline-name-ok
echo more >>file.txt && echo writable
stat -c %u file.txt
rm -rf sub run.sh && echo removed'
expect_run "copy-in run" 0 exited 0
want=$(printf '%s\n' "hello from the host" nested script-ran emptydir-ok "shadowlink -> /etc/shadow" \
  secretlink-is-link "hello from the host" "$TB" newline-name-ok writable 1000 removed)
expect_eq "copy-in: contents, script, symlinks as symlinks, sparse size, odd names" "$OUT" "$want"
check "copy-in: /etc/shadow not readable through the copied symlink" not grep -q SHADOW-READ <<<"$OUT"
check "copy-in: a host file outside DIR not readable through a copied symlink" not grep -q SECRET-READ <<<"$OUT"
check "copy-in: FIFO skipped with a warning on stderr" grep -q 'hostfifo' <<<"$ERR"
expect_eq "copy-in: the host's DIR is unchanged after the box changed /workspace" "$(tree_state "$IN")" "$in_state"

mkdir -p "$S/toobig"
head -c 20M /dev/zero >"$S/toobig/big"
hrun run --json --disk 16M --memory 256M --workspace "$S/toobig" -- true
expect_run "copy-in larger than --disk" 125 setup_error 0
check "copy-in larger than --disk: reason on stderr" [ "$(grep -c . <<<"$ERR")" -ge 2 ]

hrun run --json --workspace "$S/in/file.txt" -- true
expect_run "--workspace naming a file" 125 setup_error 0

# ---- export: hostile content ------------------------------------------------------

X=$S/x                    # everything the export may touch lives under $X/export
EXP=$X/export
mkdir -p "$X/victimdir"
echo original >"$X/victim"
UP_TARGET=/tmp/e2e-up-target-$$ # what ../../../../tmp/... would resolve to
rm -f "$UP_TARGET"
passwd_sum=$(sha256sum </etc/passwd)
x_state=$(tree_state "$X" export)

hrun run --json --disk 64M --export "$EXP" -- sh -c "
ln -s /etc/passwd evil
ln -s / rootlink
ln -s ../../../../tmp/e2e-up-target-$$ up
ln -s $X/victim abs-victim
ln -s $X/victimdir abs-victimdir
ln -s loop loop
mkdir -p d/inner && echo in-d >d/inner/f && mkdir empty
ln -s d dlink
echo hard >h1 && ln h1 h2 && ln h1 d/h3
mkfifo fifo
truncate -s 1T sparse
python3 -c '
f = open(\"sparse-data\", \"wb\"); f.truncate(1 << 30); f.seek(512 << 20); f.write(b\"hello\"); f.close()'
for n in \"\$(printf 'new\nline')\" \"\$(printf 'esc\033[31mred')\" \"\$(printf 'tab\there')\" ' lead space' '-dash' 'üñí' 'back\\slash'; do
  printf '%s' \"\$n\" >\"\$n\"
done
echo done"
expect_run "export run" 0 exited 0
expect_eq "export run: stdout only has the program's output" "$OUT" done

check "export: evil is a symlink" [ -L "$EXP/evil" ]
expect_eq "export: evil -> /etc/passwd" "$(readlink "$EXP/evil")" /etc/passwd
check "export: rootlink is a symlink" [ -L "$EXP/rootlink" ]
expect_eq "export: rootlink -> /" "$(readlink "$EXP/rootlink")" /
check "export: up is a symlink" [ -L "$EXP/up" ]
expect_eq "export: up -> ../../../../tmp/..." "$(readlink "$EXP/up")" "../../../../tmp/e2e-up-target-$$"
expect_eq "export: abs-victim is a symlink to the host file" "$(readlink "$EXP/abs-victim")" "$X/victim"
expect_eq "export: abs-victimdir is a symlink to the host dir" "$(readlink "$EXP/abs-victimdir")" "$X/victimdir"
expect_eq "export: self loop kept as a symlink" "$(readlink "$EXP/loop")" loop
check "export: dlink is a symlink" [ -L "$EXP/dlink" ]
expect_eq "export: dlink -> d" "$(readlink "$EXP/dlink")" d
expect_eq "export: nested file" "$(cat "$EXP/d/inner/f")" in-d
check "export: empty dir" [ -d "$EXP/empty" ]

expect_eq "export: /etc/passwd unchanged" "$(sha256sum </etc/passwd)" "$passwd_sum"
check "export: ../../../../tmp target not created" [ ! -e "$UP_TARGET" -a ! -L "$UP_TARGET" ]
expect_eq "export: nothing written outside DIR (its parent is unchanged)" \
  "$(tree_state "$X" export)" "$x_state"

i1=$(stat -c %i "$EXP/h1"); i2=$(stat -c %i "$EXP/h2"); i3=$(stat -c %i "$EXP/d/h3")
check "export: hardlinks stay hardlinks (h1, h2, d/h3 one inode)" [ -n "$i1" -a "$i1" = "$i2" -a "$i1" = "$i3" ]
expect_eq "export: hardlink count" "$(stat -c %h "$EXP/h1")" 3
expect_eq "export: hardlink content" "$(cat "$EXP/h2")" hard

check "export: FIFO skipped" [ ! -e "$EXP/fifo" ]
check "export: FIFO skip warned on stderr" grep -q 'fifo' <<<"$ERR"
check "export: the JSON line stays last after the warning" json_valid

expect_eq "export: sparse 1T apparent size preserved" "$(stat -c %s "$EXP/sparse")" "$TB"
check "export: sparse 1T uses (almost) no disk ($(du -k "$EXP/sparse" | cut -f1) KiB)" \
  [ "$(du -k "$EXP/sparse" | cut -f1)" -lt 1024 ]
expect_eq "export: sparse file with data: size" "$(stat -c %s "$EXP/sparse-data")" $((1 << 30))
expect_eq "export: sparse file with data: data at 512M" "$(dd if="$EXP/sparse-data" bs=1M skip=512 count=1 2>/dev/null | head -c 5)" hello
check "export: sparse file with data stays sparse" [ "$(du -k "$EXP/sparse-data" | cut -f1)" -lt 4096 ]

names_ok=$(python3 - "$EXP" <<'PY'
import os, sys
d = sys.argv[1]
want = ["new\nline", "esc\x1b[31mred", "tab\there", " lead space", "-dash", "üñí", "back\\slash"]
bad = [n for n in want if not os.path.isfile(os.path.join(d, n)) or open(os.path.join(d, n)).read() != n]
print("ok" if not bad else "missing or wrong: %r" % bad)
PY
)
expect_eq "export: names with newlines, escapes, tabs, unicode exported intact" "$names_ok" ok

# Exported files belong to whoever runs husk (root here): the box must not
# be able to hand the host a setuid or setgid program.
hrun run --export "$S/modes" -- sh -c '
printf "#!/bin/sh\necho tool\n" >tool && chmod 0755 tool
cp tool suid && chmod 4755 suid
cp tool sgid && chmod 2755 sgid
mkdir sgdir && chmod 2775 sgdir
ls -l suid sgid | cut -c1-10'
expect_eq "modes: the box could set the bits (sanity)" "$OUT" "$(printf -- '-rwxr-sr-x\n-rwsr-xr-x')"
expect_eq "modes: executable bit kept" "$(stat -c %a "$S/modes/tool" 2>/dev/null)" 755
expect_eq "modes: no setuid bit on the host" "$(stat -c %a "$S/modes/suid" 2>/dev/null)" 755
expect_eq "modes: no setgid bit on the host" "$(stat -c %a "$S/modes/sgid" 2>/dev/null)" 755
check "modes: no setgid directory on the host" [ ! -g "$S/modes/sgdir" ]

# ---- export: a DIR that already holds planted symlinks -----------------------------

P=$S/planted
PE=$P/export
mkdir -p "$PE" "$P/victimdir"
echo original >"$P/victim"
ln -s "$P/victim" "$PE/out"
ln -s "$P/victimdir" "$PE/outdir"
ln -s "$P/not-created" "$PE/dangling"
ln -s / "$PE/rootdir"
p_state=$(tree_state "$P" export)
hrun run --json --export "$PE" -- sh -c '
echo pwned >out
mkdir outdir && echo pwned >outdir/file
echo pwned >dangling
mkdir rootdir && echo pwned >rootdir/tmp-file'
expect_run "export over planted symlinks" 0 exited 0
check "planted: out was replaced by a regular file" [ -f "$PE/out" -a ! -L "$PE/out" ]
expect_eq "planted: out has the box's content" "$(cat "$PE/out")" pwned
expect_eq "planted: the symlink target was not written" "$(cat "$P/victim")" original
check "planted: outdir is now a real directory" [ -d "$PE/outdir" -a ! -L "$PE/outdir" ]
check "planted: nothing written into the directory outdir pointed to" [ -z "$(ls -A "$P/victimdir")" ]
check "planted: dangling symlink's target not created" [ ! -e "$P/not-created" ]
check "planted: rootdir is now a real directory" [ -d "$PE/rootdir" -a ! -L "$PE/rootdir" ]
check "planted: nothing written to /tmp-file on the host" [ ! -e /tmp-file ]
expect_eq "planted: nothing outside DIR changed" "$(tree_state "$P" export)" "$p_state"

# ---- export: other cases ---------------------------------------------------------------

hrun run --export "$S/new/nested/dir" -- sh -c 'echo a >a'
expect_eq "export to a DIR that does not exist yet" "$RC/$(cat "$S/new/nested/dir/a" 2>/dev/null)" "0/a"

hrun run --json --timeout 0.5 --export "$S/after-timeout" -- sh -c 'echo partial >result; sleep 1000'
expect_run "export after a timeout: status" 124 timeout 9
expect_eq "export after a timeout: what the program wrote is exported" "$(cat "$S/after-timeout/result" 2>/dev/null)" partial

echo not-a-dir >"$S/export-file"
hrun run --json --export "$S/export-file" -- sh -c 'echo x >x'
expect_run "--export naming an existing file" 125 setup_error 0
expect_eq "--export naming an existing file: the file is untouched" "$(cat "$S/export-file")" not-a-dir

# Round trip: copy in, change, export to another DIR.
hrun run --workspace "$IN" --export "$S/roundtrip" -- sh -c 'echo changed >file.txt; rm run.sh; echo new >new.txt'
expect_eq "round trip: status" "$RC" 0
expect_eq "round trip: changed file" "$(cat "$S/roundtrip/file.txt")" changed
check "round trip: deleted file absent" [ ! -e "$S/roundtrip/run.sh" ]
expect_eq "round trip: new file" "$(cat "$S/roundtrip/new.txt")" new
expect_eq "round trip: copied-in symlink still a symlink" "$(readlink "$S/roundtrip/shadowlink")" /etc/shadow
expect_eq "round trip: sub tree" "$(cat "$S/roundtrip/sub/deeper/nested.txt")" nested
expect_eq "round trip: the source DIR is unchanged" "$(tree_state "$IN")" "$in_state"
rm -f "$UP_TARGET"

e2e_global_clean "global"
finish
