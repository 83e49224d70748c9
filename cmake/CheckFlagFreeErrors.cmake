# The check that the libraries' errors name no command-line flag (ctest: flag_free_errors). Run as
#   cmake -DKEVO_SOURCE_DIR=<repo> -P cmake/CheckFlagFreeErrors.cmake
# Below tool/commands/ a bad setting is a SettingError (common/setting_error.h) that names the setting
# by its id, and the command line puts the flag in (commands/setting_flags.cpp). So in every source of
# tool/ but tool/commands/, no string literal of a `throw` statement (from `throw` to the line that
# ends with `;`) names a flag (`--name`), but for the flags allowed below; an allowed one that no
# longer occurs is a fault too (remove it: the list cannot go stale). A message built before the
# `throw` (in a variable, a helper's return value) is not seen: the check reads statements, not values.
cmake_minimum_required(VERSION 3.22)
if(NOT KEVO_SOURCE_DIR)
  get_filename_component(KEVO_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()

# Allowed: "<regex of a file under tool/> => <flag>". Keep it short and say why.
set(_allowed
  # Not kernelevo's flags: ncu's (the profiler's CSV output) and Triton's compiler's (its AOT grid).
  "profile/profile.cpp => --csv"
  "triton/triton_compile.cpp => --grid"
  # Which command writes the file that was expected: `kernelevo search --llm-batch`, and the command
  # that fetches a batch's replies (`kernelevo llm batch fetch ... --out FILE`), not a setting at fault.
  "llm/batch.cpp => --llm-batch"
  "llm/batch.cpp => --out"
)

file(GLOB_RECURSE _files RELATIVE "${KEVO_SOURCE_DIR}/tool"
     "${KEVO_SOURCE_DIR}/tool/*.cpp" "${KEVO_SOURCE_DIR}/tool/*.h" "${KEVO_SOURCE_DIR}/tool/*.cu" "${KEVO_SOURCE_DIR}/tool/*.cuh")
list(SORT _files)
set(_errors "")
set(_used "")
foreach(_f IN LISTS _files)
  if(_f MATCHES "^commands/")
    continue()
  endif()
  file(READ "${KEVO_SOURCE_DIR}/tool/${_f}" _text)
  if(NOT _text MATCHES "throw")
    continue()
  endif()
  # An escaped backslash, then an escaped quote, stay out of the way of the literals; one list element
  # per line (a ; becomes @, so that a statement's end is still seen; [ ] become < >).
  string(REPLACE "\\\\" "//" _text "${_text}")
  string(REPLACE "\\\"" "'" _text "${_text}")
  string(REPLACE "\\" "/" _text "${_text}")
  string(REPLACE ";" "@" _text "${_text}")
  string(REPLACE "[" "<" _text "${_text}")
  string(REPLACE "]" ">" _text "${_text}")
  string(REPLACE "\n" ";" _lines "${_text}")
  set(_n 0)
  set(_in FALSE)   # inside a throw statement
  foreach(_l IN LISTS _lines)
    math(EXPR _n "${_n} + 1")
    if(_l MATCHES "^[ \t]*(//|/?\\*)")
      continue()   # a comment line
    endif()
    if(NOT _in)
      if(NOT _l MATCHES "(^|[^A-Za-z0-9_])throw([^A-Za-z0-9_]|$)")
        continue()
      endif()
      set(_in TRUE)
      string(FIND "${_l}" "throw" _at)
      string(SUBSTRING "${_l}" ${_at} -1 _l)
    endif()
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
          if(_f MATCHES "^${_afile}$" AND _flag STREQUAL _aflag)
            set(_ok TRUE)
            list(APPEND _used "${_a}")
          endif()
        endforeach()
        if(NOT _ok)
          list(APPEND _errors "tool/${_f}:${_n}: an error names the flag ${_flag} (throw SettingError, which names the setting: commands/setting_flags.cpp gives its flag)")
        endif()
      endforeach()
    endforeach()
    # The statement ends with the line that ends with its ; (a trailing comment aside).
    if(_l MATCHES "@[ \t]*(//.*)?$")
      set(_in FALSE)
    endif()
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
