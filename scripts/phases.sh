# Progress for the test scripts' long phases (sourced by scripts/test.sh and services.sh).
#
#   say TEXT                        one line, with the seconds since the script started
#   phase WHAT LOGFILE COMMAND...   run COMMAND with its output in LOGFILE; a line when it
#                                   starts, every 10 s while it runs (with the log's last
#                                   line), and when it ends (how long it took), so a
#                                   minute of apt or debootstrap is never silent
#
# PHASES_NAME names the script in each line (default: the script's file name); the seconds
# count from PHASES_START (epoch seconds; test.sh exports it, so services.sh counts from the
# start of the whole run).
PHASES_START=${PHASES_START:-$EPOCHSECONDS}
PHASES_EVERY=${PHASES_EVERY:-10}

say() { printf '%s: [%4ss] %s\n' "${PHASES_NAME:-$(basename "$0")}" "$((EPOCHSECONDS - PHASES_START))" "$*" >&2; }

phase() {
  local what=$1 logfile=$2 began=$SECONDS pid rc=0 next last
  shift 2
  say "$what (log: $logfile)"
  "$@" >>"$logfile" 2>&1 </dev/null &
  pid=$!
  next=$((SECONDS + PHASES_EVERY))
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.5
    if ((SECONDS >= next)) && kill -0 "$pid" 2>/dev/null; then
      last=$(tail -n 1 "$logfile" 2>/dev/null | tr -d '\r' | cut -c1-100)
      say "$what: running for $((SECONDS - began))s${last:+; last: $last}"
      next=$((SECONDS + PHASES_EVERY))
    fi
  done
  wait "$pid" || rc=$?
  if ((rc)); then
    say "$what: failed after $((SECONDS - began))s (exit $rc); the end of $logfile:"
    tail -n 20 "$logfile" >&2 || true
    return "$rc"
  fi
  say "$what: done in $((SECONDS - began))s"
}
