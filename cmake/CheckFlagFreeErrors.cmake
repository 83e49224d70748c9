# The check that the libraries' errors name no command-line flag (ctest: flag_free_errors). Run as
#   cmake -DKEVO_SOURCE_DIR=<repo> -P cmake/CheckFlagFreeErrors.cmake
# Below tool/commands/ a bad setting is a SettingError (common/setting_error.h) that names the setting
# by its id, and the command line puts the flag in (the table common/settings.h gives each its flag).
# So in every source of tool/ but the command line's (commands/, cli/) and that table, no string
# literal (outside a comment) names a flag (`--name`), but for the flags allowed below; an allowed one
# that no longer occurs is a fault too (remove it: the list cannot go stale).
cmake_minimum_required(VERSION 3.22)
if(NOT KEVO_SOURCE_DIR)
  get_filename_component(KEVO_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()

# Allowed: "<regex of a file under tool/> => <regex of flags>". Keep it short and say why.
set(_allowed
  # Not kernelevo's options: those of the programs whose command lines tool/ builds. Bubblewrap's:
  "(sandbox/sandbox|kernelbench/python_run|baseline/baseline)[.]cpp => --(ro-bind(-try)?|remount-ro|proc|dev)"
  "sandbox/sandbox[.]cpp => --(unshare-all|die-with-parent|dev-bind|size|tmpfs|symlink|bind|chdir|setenv|new-session)"
  "sandbox/sandbox[.]cpp => --(cap-drop|help)"
  # nvcc's, the linker's and nvidia-smi's:
  "compile/(compile|arch_support)[.]cpp => --(dryrun|list-gpu-code|version|push-state|as-needed|pop-state)"
  "compile/compile[.]cpp => --(cudart|require-defined)"
  "reference/reference[.]cpp => --(no-)?as-needed"
  "baseline/baseline[.]cpp => --(query-compute-apps|format)"
  # Nsight Compute's and kernelevo-profile's (profile_main.cu is that program's main), the judge's
  # (validate/runner/ is kernelevo-runner's main; validate.cpp starts it), Triton's AOT compiler's and
  # the importer's scripts' (import_kernelbench.py, refcheck.py).
  "profile/profile[.]cpp => --(csv|page|metrics|target-processes|profile-from-start|launch-skip|launch-count)"
  "profile/profile[.]cpp => --(kernel-name|kernel|warmup|calls|confine|in|out|turns)"
  "profile/profile_main[.]cu => --.*"
  "validate/runner/.* => --.*"
  "validate/validate[.]cpp => --(info|bandwidth|serve)"
  "triton/(aot|triton_compile)[.]cpp => --(grid|help|target|kernel-name|out-path|out-name|signature)"
  "triton/triton_compile[.]cpp => --(num-warps|num-stages|no-undefined)"
  "kernelbench/kernelbench[.]cpp => --(out|regions|scratch|reference-source|device|refcheck|library|max-numel)"
  "kernelbench/kernelbench[.]cpp => --(timeout|precision|kernelevo-python|turns)"
  # Which command writes the file that was expected: `kernelevo search --llm-batch`, and the command
  # that fetches a batch's replies (`kernelevo llm batch fetch ... --out FILE`), not a setting at fault.
  "llm/batch[.]cpp => --(llm-batch|out)"
  "evolve/batch_mode[.]cpp => --llm-batch"
  # Pending (issue 52 item 2), kernelevo's own options still in text below the commands: command lines
  # to run (`kernelevo worker --redis QUEUE --gpu N`, `llm batch fetch ... --out`), values stored in
  # JSON (not_run: "--no-baselines", import.json's reasons and sandbox label), the option that
  # read_kernel_file() names, notes the tests of other parts pin. Each is to say {id} through named()
  # (common/setting_error.h), as llm/ and store/ do, and leave this list.
  "baseline/baseline[.]cpp => --aoti"
  "bench/bench[.]cpp => --aoti"
  "common/fs[.]h => --kernel"
  "kernelbench/internal/python_run[.]h => --no-sandbox"
  "kernelbench/kernelbench[.]cpp => --(jobs|max-output-gib|timeout)"
  "kernelbench/python_run[.]cpp => --(no-sandbox|sandbox|timeout)"
  "profile/profile[.]cpp => --sandbox"
  "store/writer[.]cpp => --(redis|gpu|compile-only|arch|workers)"
  "worker/remote_evaluator[.]cpp => --(redis|compile-only|arch|gpu|max-time)"
  "workflows/(bench|cache|cache_add)[.]cpp => --(no-baselines|kernels|model|task|out|arch|unvalidated)"
  "workflows/search[.]cpp => --(llm-url|out|llm-batch-replies|no-baselines|initial|model)"
)

file(GLOB_RECURSE _files RELATIVE "${KEVO_SOURCE_DIR}/tool"
     "${KEVO_SOURCE_DIR}/tool/*.cpp" "${KEVO_SOURCE_DIR}/tool/*.h" "${KEVO_SOURCE_DIR}/tool/*.cu" "${KEVO_SOURCE_DIR}/tool/*.cuh")
list(SORT _files)
set(_errors "")
set(_used "")
foreach(_f IN LISTS _files)
  if(_f MATCHES "^(commands|cli)/" OR _f STREQUAL "common/settings.h")
    continue()   # the command line's parts, and the table of settings that gives each its option
  endif()
  file(READ "${KEVO_SOURCE_DIR}/tool/${_f}" _text)
  # An escaped backslash, then an escaped quote, stay out of the way of the literals; one list element
  # per line (; [ ] become @ < >, which a CMake list would take apart).
  string(REPLACE "\\\\" "//" _text "${_text}")
  string(REPLACE "\\\"" "'" _text "${_text}")
  string(REPLACE "\\" "/" _text "${_text}")
  string(REPLACE ";" "@" _text "${_text}")
  string(REPLACE "[" "<" _text "${_text}")
  string(REPLACE "]" ">" _text "${_text}")
  string(REPLACE "\n" ";" _lines "${_text}")
  set(_n 0)
  foreach(_l IN LISTS _lines)
    math(EXPR _n "${_n} + 1")
    if(_l MATCHES "^[ \t]*(//|/?\\*)")
      continue()   # a comment line
    endif()
    string(REGEX REPLACE "//[^\"]*$" "" _l "${_l}")   # a trailing comment
    string(REGEX MATCHALL "\"[^\"]*\"" _lits "${_l}")
    foreach(_lit IN LISTS _lits)
      string(REGEX MATCHALL "(^|[^A-Za-z0-9_-])--[a-z][a-z0-9-]*" _flags "${_lit}")
      foreach(_flag IN LISTS _flags)
        string(REGEX REPLACE "^[^-]" "" _flag "${_flag}")
        set(_ok FALSE)
        foreach(_a IN LISTS _allowed)
          string(FIND "${_a}" " => " _bar)
          string(SUBSTRING "${_a}" 0 ${_bar} _afile)
          math(EXPR _start "${_bar} + 4")
          string(SUBSTRING "${_a}" ${_start} -1 _aflag)
          if(_f MATCHES "^${_afile}$" AND _flag MATCHES "^(${_aflag})$")
            set(_ok TRUE)
            list(APPEND _used "${_a}")
          endif()
        endforeach()
        if(NOT _ok)
          list(APPEND _errors "tool/${_f}:${_n}: a message names the flag ${_flag} (name the setting instead)")
        endif()
      endforeach()
    endforeach()
  endforeach()
endforeach()
foreach(_a IN LISTS _allowed)
  if(NOT _a IN_LIST _used)
    list(APPEND _errors "allowed '${_a}' no longer occurs: remove it from cmake/CheckFlagFreeErrors.cmake")
  endif()
endforeach()
list(LENGTH _errors _count)
if(_count GREATER 0)
  string(JOIN "\n  " _text ${_errors})
  message(FATAL_ERROR "flag_free_errors: ${_count} problem(s):\n  ${_text}")
endif()
message(STATUS "flag_free_errors: no error below tool/commands names a flag (but the allowed ones)")
