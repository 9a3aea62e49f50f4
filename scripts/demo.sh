#!/bin/sh
# The demo behind `make run`: a small Python script, written by "the model",
# runs in a fresh box with no network, no keys and hard limits; its output
# file is exported back to the host, and the box is gone afterwards.
set -eu
husk=${1:-build/husk}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/in" "$work/out"
cat > "$work/in/defects.csv" <<'CSV'
line,units,defects
A,1200,18
B,950,31
C,1430,12
CSV
cat > "$work/in/report.py" <<'PY'
import csv, os, socket
rows = list(csv.DictReader(open("defects.csv")))
with open("report.txt", "w") as f:
    for r in rows:
        rate = 100 * int(r["defects"]) / int(r["units"])
        line = f"line {r['line']}: {rate:.2f}% defective"
        print(line)
        f.write(line + "\n")
print("user:", os.getuid(), " host:", socket.gethostname(), " cwd:", os.getcwd())
try:
    socket.create_connection(("1.1.1.1", 443), timeout=2)
    print("network: reachable (unexpected!)")
except OSError as e:
    print("network: none (" + e.strerror + ")")
print("secrets in env:", sorted(k for k in os.environ if k not in ("PATH", "HOME", "LANG", "TERM")))
PY
echo "\$ $husk run --memory 256M --timeout 30 --workspace $work/in --export $work/out --json -- python3 report.py"
"$husk" run --memory 256M --timeout 30 --workspace "$work/in" --export "$work/out" --json -- python3 report.py
echo "exported to the host:"
ls -l "$work/out"
