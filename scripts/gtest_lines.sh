# Sourced by the GPU-host check scripts (benchmarks/studies/runner_check.sh):
# run_gtests SPEC LOG runs one test executable of build-gpu/tests under a time limit and prints one
# line per test (PASS/FAIL/SKIP NAME), a FAIL for a test the limit killed and for an exit without a
# failed test, then "   EXE: exit RC, N s, log LOG". SPEC is "exe@seconds[:gtest_filter]".
# It adds to the caller's pass/fail/skip counters and leaves the executable's exit status in rc.
run_gtests() {
  local spec=$1 log=$2 exe lim gf bin s verdict name unfinished
  exe=${spec%%@*}; lim=${spec#*@}; gf='*'
  [[ "$lim" == *:* ]] && gf=${lim#*:} && lim=${lim%%:*}
  bin=build-gpu/tests/$exe
  rc=127
  if [ ! -x "$bin" ]; then echo "FAIL $exe (not built)"; fail=$((fail + 1)); return; fi
  s=$(date +%s)
  timeout -k 10 "$lim" stdbuf -oL -eL "$bin" --gtest_filter="$gf" > "$log" 2>&1
  rc=$?
  # gtest's result lines: "[  FAILED  ] X.Y (12 ms)", a parameterized one "[  FAILED  ] A/X.Y/3,
  # where GetParam() = ... (12 ms)"; the list at the end has no time.
  while read -r verdict name; do
    case $verdict in
      OK) echo "PASS $name"; pass=$((pass + 1)) ;;
      FAILED) echo "FAIL $name"; fail=$((fail + 1)) ;;
      SKIPPED) echo "SKIP $name"; skip=$((skip + 1)) ;;
    esac
  done < <(sed -nE 's/^\[ +(OK|FAILED|SKIPPED) +\] ([A-Za-z0-9_/]+\.[A-Za-z0-9_/]+)(, where .*)? \([0-9]+ ms\)$/\1 \2/p' "$log")
  # A test the time limit killed has a RUN line and no result.
  unfinished=$(awk '/^\[ RUN      \]/{r=$4} /^\[       OK \]|^\[  FAILED  \]|^\[  SKIPPED \]/{r=""} END{print r}' "$log")
  if [ -n "$unfinished" ]; then echo "FAIL $unfinished (unfinished: killed after $lim s)"; fail=$((fail + 1)); fi
  if [ "$rc" -ne 0 ] && ! grep -q '^\[  FAILED  \]' "$log" && [ -z "$unfinished" ]; then
    echo "FAIL $exe (exit $rc without a failed test; see $log)"; fail=$((fail + 1))
  fi
  echo "   $exe: exit $rc, $(( $(date +%s) - s )) s, log $log"
}
