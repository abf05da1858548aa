# Sourced by .ci/run: steps with their durations, run one at a time or side by side, and the table
# of them all at the end (printed on exit, also when a step fails).
#   step NAME COMMAND...         run one step now (its output straight to the terminal)
#   group NAME=COMMAND ...       run these steps side by side (output per step, printed as each ends)
# A failed step fails the run; the steps after its group are skipped (CI_KEEP_GOING=1 runs them all).
# Each step is killed after CI_STEP_TIMEOUT_S (default 2400) seconds: a guard against hangs, not the budget (a loaded machine is slower).
CI_LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/cohort-ci.XXXXXX")"
CI_TABLE="$CI_LOG_DIR/table"
CI_START=$(date +%s)
CI_FAILED=0
: >"$CI_TABLE"

_ci_now() { date +%s; }

# _ci_record NAME STATUS START END
_ci_record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$CI_TABLE"; }

_ci_skip() {
  if [ "$CI_FAILED" -ne 0 ] && [ "${CI_KEEP_GOING:-0}" != 1 ]; then
    return 0
  fi
  return 1
}

step() {
  local name="$1" t0 rc=0
  shift
  if _ci_skip; then
    _ci_record "$name" skipped - -
    return 0
  fi
  echo "::: $name"
  t0=$(_ci_now)
  timeout --kill-after=15 "${CI_STEP_TIMEOUT_S:-2400}" bash -c "$*" || rc=$?
  _ci_record "$name" "$([ $rc -eq 0 ] && echo ok || echo "FAILED($rc)")" "$t0" "$(_ci_now)"
  [ $rc -eq 0 ] || CI_FAILED=1
}

group() {
  local spec name cmd pids=() names=() starts=() i rc t0
  if _ci_skip; then
    for spec in "$@"; do _ci_record "${spec%%=*}" skipped - -; done
    return 0
  fi
  for spec in "$@"; do
    name="${spec%%=*}"
    cmd="${spec#*=}"
    echo "::: $name (started, side by side)"
    t0=$(_ci_now)
    timeout --kill-after=15 "${CI_STEP_TIMEOUT_S:-2400}" bash -c "$cmd" >"$CI_LOG_DIR/$(echo "$name" | tr -c 'a-zA-Z0-9\n' _).log" 2>&1 </dev/null &
    pids+=($!)
    names+=("$name")
    starts+=("$t0")
  done
  # Report each step as it ends (in the order they end).
  local left=${#pids[@]} done_=()
  while [ "$left" -gt 0 ]; do
    for i in "${!pids[@]}"; do
      [ -n "${done_[$i]:-}" ] && continue
      if ! kill -0 "${pids[$i]}" 2>/dev/null; then
        rc=0
        wait "${pids[$i]}" || rc=$?
        done_[$i]=1
        left=$((left - 1))
        local st
        st=$([ $rc -eq 0 ] && echo ok || echo "FAILED($rc)")
        _ci_record "${names[$i]}" "$st" "${starts[$i]}" "$(_ci_now)"
        echo "::: ${names[$i]}: $st after $(( $(_ci_now) - starts[i] )) s; its output:"
        cat "$CI_LOG_DIR/$(echo "${names[$i]}" | tr -c 'a-zA-Z0-9\n' _).log"
        echo "::: end of ${names[$i]}"
        [ $rc -eq 0 ] || CI_FAILED=1
      fi
    done
    [ "$left" -gt 0 ] && sleep 1
  done
  return 0
}

ci_table() {
  local end name st t0 t1
  end=$(_ci_now)
  echo
  echo "ci: steps (start = seconds after the run began; steps side by side overlap)"
  printf '  %-28s %-11s %7s %9s\n' step status start seconds
  while IFS=$'\t' read -r name st t0 t1; do
    if [ "$t0" = - ]; then
      printf '  %-28s %-11s %7s %9s\n' "$name" "$st" - -
    else
      printf '  %-28s %-11s %7s %9s\n' "$name" "$st" "$((t0 - CI_START))" "$((t1 - t0))"
    fi
  done <"$CI_TABLE"
  printf '  %-28s %-11s %7s %9s\n' total "$([ "$CI_FAILED" -eq 0 ] && echo ok || echo FAILED)" 0 "$((end - CI_START))"
}
