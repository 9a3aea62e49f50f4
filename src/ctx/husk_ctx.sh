# husk's bash code-context runner: the rc file of a persistent interactive
# bash in a box.  An interactive shell because only it aborts the running
# command line on SIGINT (a builtin `while true` loop included) and goes on
# with its variables, functions, cwd and options intact.
#
#   HUSK_CODE_FD=N HUSK_EV_FD=M bash --rcfile husk_ctx.sh --noediting -i
#
# bash cannot parse JSON, so its requests are framed apart from the
# Python and JavaScript runners' (src/ctx/husk_ctx.py has their protocol):
#
#   stdin           command lines, only these two forms, in this order:
#                     __husk_env NAME LEN      (any number; before the read)
#                     __husk_read ID LEN
#                     __husk_eval
#   HUSK_CODE_FD    the bytes those lines announce: each __husk_env's value,
#                   then the code, LEN bytes each, nothing between
#   HUSK_EV_FD      events, JSON lines:
#                     {"type":"ready","language":"bash","version":"5.2.15","pid":N}
#                     {"type":"end","id":ID,"execution_count":N,
#                      "status":"ok"|"error","exit_code":N}
#   stdout, stderr  the code's own (unframed); bash prints two lines about
#                   job control on stderr before "ready": a reader drops
#                   what comes before it
#
# The code runs at the top level of the shell (`declare` makes globals),
# with stdin from /dev/null and without the two protocol fds; the
# __husk_env values are exported for that execution and restored at its
# end.  ID is 1 to 64 of [A-Za-z0-9_.-] and NAME a variable name: the
# lines are read by bash, so the caller writes only ids and names it has
# checked, and LENs that are the bytes it wrote (a wrong one desynchronises
# the context, which then has to be restarted).  An interrupted execution ends
# with exit code 130: the caller that sent SIGINT reports "interrupted".
# `exit` ends the context (its event fd closes).  Everything here is the
# box's own: the caller treats events as untrusted input.

__husk_count=0
__husk_phase=
__husk_saved=()

__husk_take() { # VAR LEN: read LEN bytes of the code fd into VAR
  local LC_ALL=C
  case $2 in '' | *[!0-9]*) return 1 ;; esac
  if [ "$2" -eq 0 ]; then
    printf -v "$1" ''
    return 0
  fi
  IFS= read -r -N "$2" -u "$HUSK_CODE_FD" "$1"
}

__husk_env() { # NAME LEN
  local __v
  __husk_take __v "$2" || return 1
  case $1 in '' | [0-9]* | *[!A-Za-z0-9_]*) return 1 ;; esac
  if [ -n "${!1+set}" ]; then
    __husk_saved+=("$1=${!1}")
  else
    __husk_saved+=("$1")
  fi
  export "$1=$__v"
}

__husk_read() { # ID LEN
  __husk_code='__husk_bad_request'
  __husk_id=
  case $1 in '' | *[!A-Za-z0-9_.-]*) ;; *) [ ${#1} -le 64 ] && __husk_id=$1 ;; esac
  __husk_take __husk_code "$2" || __husk_code='__husk_bad_request'
  [ -n "$__husk_id" ] || __husk_code='__husk_bad_request'
  __husk_phase=1
}

__husk_bad_request() {
  echo "husk: bad request" >&2
  return 2
}

# After each command line: the one that read the code is followed by the
# one that ran it, whose status ends the execution.
__husk_prompt() {
  local st=$? kv status=ok id=null
  case $__husk_phase in
  1) __husk_phase=2 ;;
  2)
    __husk_phase=
    for kv in "${__husk_saved[@]}"; do
      case $kv in *=*) export "$kv" ;; *) unset "$kv" ;; esac
    done
    __husk_saved=()
    __husk_count=$((__husk_count + 1))
    [ "$st" -eq 0 ] || status=error
    [ -n "$__husk_id" ] && id="\"$__husk_id\""
    printf '{"type":"end","id":%s,"execution_count":%d,"status":"%s","exit_code":%d}\n' \
      "$id" "$__husk_count" "$status" "$st" >&"$HUSK_EV_FD"
    ;;
  esac
}

shopt -s expand_aliases
alias __husk_eval='eval "$__husk_code" </dev/null {HUSK_CODE_FD}<&- {HUSK_EV_FD}>&-'
PROMPT_COMMAND=__husk_prompt
PS1=
PS2=
PS0=
unset HISTFILE
printf '{"type":"ready","language":"bash","version":"%s","pid":%d}\n' \
  "${BASH_VERSION%%(*}" "$$" >&"$HUSK_EV_FD"
