# Helpers of the storage-plane suites (sourced after lib.sh and serve.bash).
#
#   s3_start [ARGS...]   serve_start with an S3 listener on a free port;
#                        sets S3 (its URL)
#   s3_creds NAME        a tenant with an API key ($TKEY) and S3 keys:
#                        sets AK, SK (and exports them for the clients)
#   awsc ARGS...         Debian's awscli v2 against $S3, quiet
#   s3req METHOD PATH [ARGS...]  see below

# Debian's awscli v2 by full path: a pip/pyenv one may come first on PATH.
AWS=${AWS:-/usr/bin/aws}
export AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true AWS_PAGER=""
unset AWS_PROFILE AWS_CONFIG_FILE

s3_start() {
  serve_start --s3-listen 127.0.0.1:0 "$@" || return 1
  local from
  S3=$(sed -n 's|^husk: S3 listening on \(http://127.0.0.1:[0-9]*\) .*|\1|p' "$SERVE_LOG" | tail -n1)
  [ -n "$S3" ]
}

s3_creds() { # NAME
  new_tenant "$1" || return 1
  local save=$KEY
  KEY=$TKEY
  api POST /v1/s3-keys
  KEY=$save
  AK=$(jf 'j["access_key_id"]')
  SK=$(jf 'j["secret_access_key"]')
  export AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK
  [ -n "$AK" ] && [ -n "$SK" ]
}

awsc() {
  if [ "$1" = s3 ] && [[ "$2" =~ ^(cp|mv|rm|sync)$ ]]; then
    "$AWS" --endpoint-url "$S3" s3 "$2" --only-show-errors "${@:3}"
  else
    "$AWS" --endpoint-url "$S3" "$@"
  fi
}

# s3req METHOD PATH [s3req.py ARGS...]: one request signed by
# tests/serve/s3req.py (Python's own SigV4, independent of ours); sets
# CODE and BODY ($T_SCRATCH/s3body, headers in $T_SCRATCH/s3hdr).
S3REQ="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/s3req.py"
s3req() { # METHOD PATH [ARGS...]
  local method=$1 path=$2; shift 2
  CODE=$(AWS_ACCESS_KEY_ID=${CAK:-$AK} AWS_SECRET_ACCESS_KEY=${CSK:-$SK} \
    python3 "$S3REQ" "$method" "$S3$path" --out "$T_SCRATCH/s3body" --headers "$T_SCRATCH/s3hdr" "$@" 2>"$T_SCRATCH/s3req.err")
  BODY=$(tr -d '\0' <"$T_SCRATCH/s3body" 2>/dev/null)
}
# The S3 error code of $BODY.
s3code() { sed -n 's|.*<Code>\([^<]*\)</Code>.*|\1|p' <<<"$BODY" | head -n1; }
expect_s3() { # DESC STATUS CODE
  local c
  c=$(s3code)
  if [ "$CODE" = "$2" ] && [ "$c" = "$3" ]; then ok "$1"; else not_ok "$1 (got $CODE $c, want $2 $3: $(head -c 300 <<<"$BODY"))"; fi
}
# Files of the store on disk (objects, parts, temporary).
store_files() { find "$DATA/storage/$1" -type f 2>/dev/null | wc -l; }
