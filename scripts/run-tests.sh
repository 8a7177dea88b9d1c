#!/usr/bin/env bash
# `make test` / `make test-slow`: vitest over one set of tests (fast or slow,
# vitest.config.ts), and nothing left behind when it ends, however it ends:
# Ctrl-C, a kill, a crash. Every process a test starts (its daemons, which
# detach into sessions of their own, its trainers, fixtures) inherits
# LOGD_TEST_RUN, this run's own id; at the end every process of this user
# that carries it is stopped (SIGTERM, then SIGKILL after 2 s). Another test
# run going on beside this one has another id and is left alone.
#
#   bash scripts/run-tests.sh fast|slow [vitest args...]
set -u
set_name=${1:?usage: run-tests.sh fast|slow [vitest args]}
shift
export LOGD_TESTS=$set_name
LOGD_TEST_RUN="$$-$(date +%s%N)"
export LOGD_TEST_RUN

ours() {
  # pids (not this script's) whose environment carries LOGD_TEST_RUN=<this run>
  for e in /proc/[0-9]*/environ; do
    pid=${e#/proc/}; pid=${pid%/environ}
    [ "$pid" = "$$" ] && continue
    if { tr "\0" "\n" < "$e"; } 2>/dev/null | grep -qx "LOGD_TEST_RUN=$LOGD_TEST_RUN"; then echo "$pid"; fi
  done
}

cleanup() {
  trap - INT TERM EXIT
  local left
  left=$(ours)
  [ -z "$left" ] && return
  kill -TERM $left 2>/dev/null
  for _ in $(seq 1 20); do
    left=$(ours)
    [ -z "$left" ] && break
    sleep 0.1
  done
  left=$(ours)
  if [ -n "$left" ]; then
    kill -KILL $left 2>/dev/null
  fi
  echo "run-tests: stopped what the tests had left running" >&2
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap cleanup EXIT

npx vitest run "$@" &
child=$!
wait $child
rc=$?
cleanup
exit $rc
