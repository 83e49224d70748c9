# The candidate-language seam's check (ctest: language_names). Run as
#   cmake -DKEVO_SOURCE_DIR=<repo> -P cmake/CheckLanguageNames.cmake
# Outside tool/triton/ (Triton's own code) and tool/language/ (the registry that lists it) no source
# of tool/ names Triton, in any case: the other parts reach it through CandidateLanguage
# (compile/language.h). Fails naming each file:line that does, but for the lines allowed below.
cmake_minimum_required(VERSION 3.22)
if(NOT KEVO_SOURCE_DIR)
  get_filename_component(KEVO_SOURCE_DIR "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
endif()

# Allowed: "<regex of a file under tool/> => <regex a line must match>" (a line's ; [ ] \\ read as
# spaces). Keep it short and say why.
set(_allowed
  # Not the candidate language: the environment a sandboxed Python keeps, and torch.compile's own
  # Triton (inductor) cache inside the import sandbox.
  "sandbox/sandbox.cpp => \"TRITON_\""
  "kernelbench/python_run.cpp => TRITON_CACHE_DIR"
  # The table of environment variables (README's table is its output): KERNELEVO_PYTHON's meaning.
  "common/settings.h => The Python with Triton 3.x for Triton candidates"
  # The one message for a --kernel/--initial path that is not a kernel file (floor 1, below the registry).
  "common/fs\\.(cpp|h) => not a kernel file \\(\\.cu, or a Triton \\.py\\)"
  # `kernelevo doctor` reports the optional tools by name (nvcc, LibTorch, Python, PyTorch, Triton, ncu).
  "commands/doctor_command.cpp => .*"
)

file(GLOB_RECURSE _files RELATIVE "${KEVO_SOURCE_DIR}/tool"
     "${KEVO_SOURCE_DIR}/tool/*.cpp" "${KEVO_SOURCE_DIR}/tool/*.h" "${KEVO_SOURCE_DIR}/tool/*.cu" "${KEVO_SOURCE_DIR}/tool/*.cuh")
list(SORT _files)
set(_errors "")
foreach(_f IN LISTS _files)
  if(_f MATCHES "^(triton|language)/")
    continue()
  endif()
  file(READ "${KEVO_SOURCE_DIR}/tool/${_f}" _text)
  string(TOLOWER "${_text}" _low)
  if(NOT _low MATCHES "triton")
    continue()
  endif()
  # One list element per line: what would split or join CMake list elements becomes a space.
  string(REGEX REPLACE "[];[\\]" " " _text "${_text}")
  string(REPLACE "\n" ";" _all "${_text}")
  set(_n 0)
  foreach(_l IN LISTS _all)
    math(EXPR _n "${_n} + 1")
    string(TOLOWER "${_l}" _low)
    if(NOT _low MATCHES "triton")
      continue()
    endif()
    set(_ok FALSE)
    foreach(_a IN LISTS _allowed)
      string(FIND "${_a}" " => " _bar)
      string(SUBSTRING "${_a}" 0 ${_bar} _afile)
      math(EXPR _start "${_bar} + 4")
      string(SUBSTRING "${_a}" ${_start} -1 _are)
      if(_f MATCHES "^${_afile}$" AND _l MATCHES "${_are}")
        set(_ok TRUE)
        break()
      endif()
    endforeach()
    if(NOT _ok)
      list(APPEND _errors "tool/${_f}:${_n}: names Triton outside tool/triton and the registry (go through CandidateLanguage, compile/language.h)")
    endif()
  endforeach()
endforeach()
list(LENGTH _errors _count)
if(_count GREATER 0)
  string(JOIN "\n  " _text ${_errors})
  message(FATAL_ERROR "language_names: ${_count} problem(s):\n  ${_text}")
endif()
message(STATUS "language_names: no part outside tool/triton and tool/language names Triton (but the allowed lines)")
