#!/bin/bash
# The `husk run` contract as seen from outside: exit statuses, usage errors,
# the --json summary for every reason, and stdin/stdout/stderr relaying.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e.bash"
e2e_baseline

# ---- exit statuses -------------------------------------------------------

hrun run --json -- true
expect_run "true" 0 exited 0

hrun run --json -- sh -c 'exit 3'
expect_run "exit 3" 3 exited 0

hrun run --json -- sh -c 'exit 255'
expect_run "exit 255" 255 exited 0

hrun run --json -- sh -c 'kill -TERM $$'
expect_run "killed by SIGTERM" 143 signaled 15

hrun run --json -- sh -c 'kill -KILL $$'
expect_run "killed by SIGKILL (its own doing)" 137 signaled 9

hrun run --json -- python3 -c 'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)'
expect_run "killed by SIGSEGV" 139 signaled 11

# 126: exists but cannot be executed.
mkdir -p "$T_SCRATCH/ws126"
printf '#!/bin/sh\necho should-not-run\n' >"$T_SCRATCH/ws126/script.sh"
chmod 0644 "$T_SCRATCH/ws126/script.sh"
hrun run --json --workspace "$T_SCRATCH/ws126" -- ./script.sh
expect_run "non-executable file" 126 exited 0
check "non-executable file: did not run" [ -z "$OUT" ]
check "non-executable file: one-line reason on stderr" [ "$(grep -c 'script.sh' <<<"$ERR")" -ge 1 ]

hrun run --json -- /usr
expect_run "a directory as PROGRAM" 126 exited 0

hrun run --json -- /etc/passwd
expect_run "non-executable /etc/passwd" 126 exited 0

# 127: not found.
hrun run --json -- no-such-program-e2e
expect_run "missing program in PATH" 127 exited 0
check "missing program: reason on stderr names it" grep -q 'no-such-program-e2e' <<<"$ERR"
check "missing program: nothing on stdout" [ -z "$OUT" ]

hrun run --json -- /no/such/dir/prog
expect_run "missing absolute program" 127 exited 0

# ---- 125: husk's own failures (bad options) --------------------------------
# Each must exit 125 without running anything (the program would print RAN),
# print nothing on stdout and give a one-line reason on stderr.
bad_option() { # DESC ARGS...
  local d=$1; shift
  hrun run "$@"
  expect_eq "bad option $d: exit 125" "$RC" 125
  check "bad option $d: nothing ran, stdout empty" [ -z "$OUT" ]
  local lines
  lines=$(printf '%s' "$ERR" | grep -c .)
  expect_eq "bad option $d: one-line reason on stderr" "$lines" 1
}
bad_option "--memory 12X" --memory 12X -- echo RAN
bad_option "--memory 1K (below minimum)" --memory 1K -- echo RAN
bad_option "--pids 0" --pids 0 -- echo RAN
bad_option "--pids abc" --pids abc -- echo RAN
bad_option "--cpus -1" --cpus -1 -- echo RAN
bad_option "--cpus 0" --cpus 0 -- echo RAN
bad_option "--timeout abc" --timeout abc -- echo RAN
bad_option "--timeout 0" --timeout 0 -- echo RAN
bad_option "--timeout -1" --timeout -1 -- echo RAN
bad_option "--disk 0" --disk 0 -- echo RAN
bad_option "--disk 5Q" --disk 5Q -- echo RAN
bad_option "--output-limit 0" --output-limit 0 -- echo RAN
bad_option "--env without =" --env NOEQUALS -- echo RAN
bad_option "--env with empty name" --env =x -- echo RAN
bad_option "missing PROGRAM" --memory 64M
bad_option "missing PROGRAM after --" --
bad_option "relative -w" -w relative/dir -- echo RAN
bad_option "relative --workdir" --workdir . -- echo RAN
bad_option "unknown option" --no-such-option -- echo RAN
bad_option "option missing its value" --memory

# With --json, the JSON summary is promised as the last stderr line for every
# failure of husk, usage errors included (reason setup_error, exit_code 125).
hrun run --json --memory 12X -- true
expect_eq "--json then bad option: exit 125" "$RC" 125
if json_valid; then
  expect_eq "--json then bad option: json reason" "$(json_field reason)" setup_error
  expect_eq "--json then bad option: json exit_code" "$(json_field exit_code)" 125
else
  not_ok "--json then bad option: last stderr line is a JSON object (got '$JSON')"
fi

# ---- --json: fields and every reason -------------------------------------

hrun run --json -- sh -c 'echo out; echo err >&2; exit 7'
check "json: last stderr line is a JSON object" json_valid
for f in exit_code signal wall_ms cpu_ms memory_peak_bytes; do
  check "json: field $f is a non-negative integer" json_has "$f" int
done
check "json: field reason is a string" json_has reason str
check "json: memory_peak_bytes > 0" [ "$(json_field memory_peak_bytes)" -gt 0 ]
expect_eq "json: program stdout untouched" "$OUT" out
expect_eq "json: program stderr comes first" "$(head -n 1 <<<"$ERR")" err
expect_eq "json: stderr is program's line + the JSON line" "$(grep -c . <<<"$ERR")" 2

hrun run -- sh -c 'echo out; exit 7'
expect_eq "without --json: no summary on stderr" "$ERR" ""
expect_eq "without --json: exit status still the program's" "$RC" 7

# The program's stderr may not end with a newline; the summary must still
# be a line of its own.
hrun run --json -- sh -c 'printf "no newline" >&2'
if json_valid; then ok "json: own line after stderr without final newline"; else
  not_ok "json: own line after stderr without final newline (last line '$JSON')"; fi

hrun run --json --timeout 0.3 -- sleep 30
expect_run "json reason timeout" 124 timeout 9

hrun run --json --pids 16 -- sh -c 'i=0; while [ $i -lt 64 ]; do sleep 30 & i=$((i+1)); done; wait'
expect_run "json reason pids" 137 pids 9

hrun run --json --memory 32M --timeout 30 -- python3 -c '
a = []
while True:
    a.append(bytearray(1 << 20))'
expect_run "json reason memory" 137 memory 9

hrun run --json --output-limit 4K -- yes
expect_run "json reason output" 137 output 9

hrun run --json --workspace "$T_SCRATCH/does-not-exist" -- true
expect_run "json reason setup_error (missing --workspace dir)" 125 setup_error 0
expect_eq "setup_error: one reason line + the JSON line" "$(grep -c . <<<"$ERR")" 2
check "setup_error: stdout empty" [ -z "$OUT" ]

hrun run --json -w /etc/cannot-create -- true
expect_run "json reason setup_error (workdir cannot be created)" 125 setup_error 0

# A step of the box's setup that fails in its child, after the clone: the
# caller's hard RLIMIT_MEMLOCK is below the box's, and the child, root only
# in the box's user namespace, cannot raise it.  The child's own error is
# the reason husk gives: the step and why.
printf '#!/bin/sh\nexec prlimit --memlock=0:0 -- "%s" "$@"\n' "$HUSK" >"$T_SCRATCH/husk-memlock0"
chmod +x "$T_SCRATCH/husk-memlock0"
HUSK=$T_SCRATCH/husk-memlock0 hrun run --json -- true
expect_run "json reason setup_error (a step fails in the box's child)" 125 setup_error 0
check "setup failure in the child: the reason names the step and why" \
  grep -q 'cannot set up the box: cannot set RLIMIT_MEMLOCK: Operation not permitted' <<<"$ERR"

# ---- stdin / stdout / stderr -----------------------------------------------

out=$(echo hi | timeout "$E2E_TIMEOUT" "$HUSK" run -- cat)
expect_eq "stdin: echo hi | husk run -- cat" "$out" hi

head -c 3000000 /dev/urandom >"$T_SCRATCH/in.bin"
hrun_in "$T_SCRATCH/in.bin" run -- sha256sum
expect_eq "stdin: 3 MB binary arrives intact" "${OUT%% *}" "$(sha256sum <"$T_SCRATCH/in.bin" | cut -d' ' -f1)"

out=$(yes | timeout "$E2E_TIMEOUT" "$HUSK" run -- head -n 2)
expect_eq "stdin: endless stdin, program reads two lines" "$out" "$(printf 'y\ny')"

rc=0
yes | timeout "$E2E_TIMEOUT" "$HUSK" run -- true || rc=$?
expect_eq "stdin: endless stdin, program ignores it and exits" "$rc" 0

hrun run -- cat
expect_eq "stdin: /dev/null gives EOF" "$RC/$OUT" "0/"

timeout "$E2E_TIMEOUT" "$HUSK" run -- seq 1 700000 >"$T_SCRATCH/seq.out" 2>"$T_SCRATCH/seq.err"
seq 1 700000 >"$T_SCRATCH/seq.want"
check "stdout: ~4.8 MB arrives intact" cmp -s "$T_SCRATCH/seq.out" "$T_SCRATCH/seq.want"
check "stdout: large output leaves stderr empty" [ ! -s "$T_SCRATCH/seq.err" ]

timeout "$E2E_TIMEOUT" "$HUSK" run -- python3 -c '
import os, sys
data = bytes(range(256)) * 20000
sys.stdout.buffer.write(data); sys.stdout.flush()' | sha256sum >"$T_SCRATCH/bin.sum"
python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 20000)' | sha256sum >"$T_SCRATCH/bin.want"
check "stdout: 5 MB of binary bytes intact" cmp -s "$T_SCRATCH/bin.sum" "$T_SCRATCH/bin.want"

hrun run -- sh -c 'for i in 1 2 3; do echo out$i; echo err$i >&2; done'
expect_eq "separation: stdout has only stdout" "$OUT" "$(printf 'out1\nout2\nout3')"
expect_eq "separation: stderr has only stderr" "$ERR" "$(printf 'err1\nerr2\nerr3')"

hrun run --json --timeout 0.3 -- sleep 30
check "stdout clean on timeout" [ -z "$OUT" ]
hrun run --json -- no-such-program-e2e
check "stdout clean on 127" [ -z "$OUT" ]

# husk's own stdio may be closed: a closed stdin reads as end of input, a
# closed stdout/stderr loses output but not the run.  (The guard --timeout
# turns a hang into 124.)
"$HUSK" run --json --timeout 5 -- cat <&- >"$T_SCRATCH/c.out" 2>"$T_SCRATCH/c.err"
rc=$?
JSON=$(tail -n 1 "$T_SCRATCH/c.err")
expect_eq "closed stdin: the program sees EOF and exits 0" "$rc" 0
expect_eq "closed stdin: reason exited" "$(json_field reason)" exited
timeout "$E2E_TIMEOUT" "$HUSK" run -- sh -c 'echo lost; exit 6' >&- 2>/dev/null
expect_eq "closed stdout: the run still ends with the program's status" "$?" 6
timeout "$E2E_TIMEOUT" "$HUSK" run -- sh -c 'echo kept; echo lost >&2; exit 7' 2>&- >"$T_SCRATCH/c.out"
expect_eq "closed stderr: the run still ends with the program's status" "$?" 7
expect_eq "closed stderr: stdout still relayed" "$(cat "$T_SCRATCH/c.out")" kept

# The program closing its own stdout/stderr does not end the run early.
hrun run -- sh -c 'exec >&- 2>&-; sleep 0.3; exit 5'
expect_eq "program closes stdout+stderr, keeps running, exits 5" "$RC" 5

# stdin the program never reads does not block the run.
hrun_in "$T_SCRATCH/in.bin" run -- sh -c 'exit 0'
expect_eq "3 MB of stdin the program ignores" "$RC" 0

# Exit codes that look like husk's own are still reported as the program's.
hrun run --json -- sh -c 'exit 124'
expect_run "program exits 124 by itself" 124 exited 0
hrun run --json -- sh -c 'exit 137'
expect_run "program exits 137 by itself" 137 exited 0
hrun run --json -- sh -c 'exit 125'
expect_run "program exits 125 by itself" 125 exited 0

# Everything after PROGRAM belongs to the program, husk-like options included.
hrun run -- echo --json --memory 12X -- -w x
expect_eq "options after PROGRAM go to the program" "$RC/$OUT/$ERR" "0/--json --memory 12X -- -w x/"
hrun run echo no-dashdash
expect_eq "PROGRAM without --" "$RC/$OUT" "0/no-dashdash"

# Arguments reach the program verbatim.
hrun run -- printf '%s|' 'a b' '' "$(printf 'x\ny')" '*' '$HOME'
expect_eq "argv passed verbatim" "$OUT" "$(printf '%s|' 'a b' '' "$(printf 'x\ny')" '*' '$HOME')"

# The program's exit code survives when it writes a lot and exits at once.
hrun run -- sh -c 'seq 1 100000; exit 42'
expect_eq "exit code after much output" "$RC" 42
expect_eq "all output before the exit relayed" "$(tail -n 1 <<<"$OUT")" 100000

# --help and version go to stdout and exit 0.
hrun run --help
expect_eq "husk run --help exits 0" "$RC" 0
check "husk run --help prints usage" grep -q -- '--memory' <<<"$OUT"

e2e_global_clean "global"
finish
