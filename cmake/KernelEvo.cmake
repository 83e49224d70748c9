# KernelEvo.cmake — evolved CUDA kernels for LibTorch functions, per GPU architecture, from a cache
# that you commit.
#
#   kernelevo_optimize(<name>             # makes the library kernelevo_<name> (alias KernelEvo::<name>)
#     [TARGET    <target>]                # links that library into <target>
#     REFERENCE  <file.cpp>               # LibTorch reference = fallback = correctness oracle
#     [FUNCTION  <ns::ref_function>]      # the reference's C++ name (default: <name>)
#     INPUTS     "x:float32[M,N]" "bias:float32[N]" ...   # name:dtype[dims][=init]
#     OUTPUTS    "y:float32[M,N]" ...
#     [SHAPES    "M=4096,N=4096" "M=33,N=1001" ...]        # all are checked and (by default) timed
#     CACHE_DIR  <dir>                    # committed: <dir>/<name>/sm_90.cu + sm_90.json
#     [ARCHITECTURES 90 80 ...]           # default: the target's CUDA_ARCHITECTURES, else CMAKE_CUDA_ARCHITECTURES
#     [TOLERANCE <atol> [<rtol>]]         # default 1e-4 (1e-2 with float16/bfloat16 tensors)
#     [PRECISION <policy>]                # pytorch | strict | tf32 | bf16 (default KERNELEVO_PRECISION)
#     [TRIALS <n>]                        # correctness trials (default 5)
#     [TIMING_SHAPES <i> ...]             # shape sets timed (indices, ascending; default all)
#     [TIMING_WEIGHTS <w> ...]            # their weights in the fitness (geometric mean; default 1)
#     [FLOPS "<expr>"]                    # FLOPs of one call, e.g. "2*M*N*K" (adds a compute floor)
#     [NAMESPACE <ns>]                    # namespace of the generated function (default: kernelevo)
#     [RETURNS TUPLE|VECTOR]              # how a reference with several outputs returns them (default TUPLE)
#     [SEARCH_OPTIONS <args>...]          # extra `kernelevo search` arguments for this function
#     [MIN_SPEEDUP <x>]                   # this function's KERNELEVO_MIN_SPEEDUP (default: that option)
#     [REQUIRED])                         # like KERNELEVO_REQUIRE_KERNELS, for this function only
#
#   kernelevo_optimize(<name> TASK <task.json> CACHE_DIR <dir> ...)   # a task file made elsewhere
#     (export_task, export_model's regions, `kernelevo import kernelbench`): <name> is the task's,
#     the file gives tensors, shapes, tolerance, precision and reference (not repeated here); its
#     hashes come from `kernelevo cache hash` (KernelEvoModel.cmake).
#   kernelevo_optimize_model(<name> MODEL_DIR <dir> [TARGET t] ...)  # every region of a model folder
#     as such a function, in the one library kernelevo_model_<name> (KernelEvoModel.cmake)
#
# Init kinds (optional, after '='): randn(mean,std) rand(low,high) randint(low,high) full(value)
# ones zeros arange. Defaults: randn(0,1) for floating dtypes, randint(-100,100) for integers.
#
# What it does at configure time:
#  1. writes the task file <build>/kernelevo/<name>/task.json (the validator's format);
#  2. computes the task hash and the reference hash in pure CMake — the same canonical JSON and
#     SHA-256 that `kernelevo` computes (Task::hash(), Task::reference_hash(); `kernelevo cache hash
#     --task T` prints them; tests/cache checks both agree), for lookup.json;
#  3. expands the architectures (ARCHITECTURES, else the target's CUDA_ARCHITECTURES, else
#     CMAKE_CUDA_ARCHITECTURES; every CMake spelling: 90, 90a, 90-real, 80;90, native, all,
#     all-major) and, per architecture, takes the kernelevo program's verdict on <CACHE_DIR>/<name>/sm_XX.cu
#     + .json (`kernelevo cache status --json`, once per function with entries; without a program they
#     are not checked, said once, and the reference runs) and prints one line: cached kernel
#     (speedup, origin, date), or the closest binary-compatible entry it uses
#     (sm_86 can use sm_80, sm_90a uses sm_90; a dedicated entry always wins), or a WARNING for a
#     missing, stale (why) or invalid entry — with the exact `kernelevo search` command that would
#     fill the gap (a `--model MODEL` placeholder, explained, when the options name no model); a
#     valid entry measured slower than the minimum speedup (KERNELEVO_MIN_SPEEDUP, default 1.0, or
#     MIN_SPEEDUP), or recording none, is kept out and the reference is built, said in one line;
#     the end of configure prints a summary over every function and architecture;
#  4. with KERNELEVO_SEARCH=ON, runs that search for missing/stale entries (its progress is shown),
#     with a spending and time cap (KERNELEVO_SEARCH_BUDGET_USD, KERNELEVO_SEARCH_MAX_TIME) unless
#     the options give their own, then resets KERNELEVO_SEARCH to OFF: a later configure (an
#     automatic one too) never starts a search; a failed search never fails configure unless
#     KERNELEVO_REQUIRE_KERNELS (or REQUIRED) is ON; with no --model in the options, configure
#     stops with one error saying what to set, before any search;
#  5. makes the library kernelevo_<name> from templates/: <build>/kernelevo/include/kernelevo/<name>.h
#     (torch-free declaration of <ns>::<name> with the reference's LibTorch signature),
#     <build>/kernelevo/<name>/dispatch.cpp (the only file that includes ATen), the reference, and
#     every cached kernel in use compiled for its own architecture only, with kevo_forward and its
#     __global__ kernels renamed so that functions and architectures coexist in one binary. Files
#     are rewritten only when their content changes, so adding an architecture rebuilds only that
#     kernel and the dispatch table.
#
# PyTorch operators: every function is also a PyTorch operator kernelevo::<name> once a module
# library registers it:
#
#   kernelevo_torch_library(<target> FUNCTIONS <name>...)   # after find_package(Torch) and the
#                                                           # kernelevo_optimize() of each name
#
# makes the MODULE library <target> (lib<target>.so; no other target links it) for Python:
#   torch.ops.load_library(path); y = torch.ops.kernelevo.gelu_bias(x, bias)
# Schema: <name>(Tensor <input>, ...) -> Tensor, or (Tensor, ...) for several outputs. Kernels:
# CUDA = the generated dispatch (the evolved kernel cached for the GPU's architecture, else the
# reference), CPU and Meta (shape inference for torch.compile) = the reference, Autograd = the
# reference's backward (re-run on detached inputs and differentiated; no double backward). Build it
# against the LibTorch of the Python that loads it (torch.utils.cmake_prefix_path): the C++ ABI
# must match. examples/fused_ops/example_op.py shows it.
#
# Global switches (cache variables): KERNELEVO_SEARCH, KERNELEVO_REQUIRE_KERNELS,
# KERNELEVO_EXECUTABLE, KERNELEVO_SEARCH_OPTIONS, KERNELEVO_SEARCH_BUDGET_USD,
# KERNELEVO_SEARCH_MAX_TIME, KERNELEVO_MIN_SPEEDUP (a cached kernel measured slower than this over its
# reference is kept out: 1.0, as Python's load_model(min_speedup=1.0) and kevo::cache::kDefaultMinSpeedup;
# 0 keeps none out), KERNELEVO_TORCH_CUDA (AUTO|ON|OFF), KERNELEVO_PRECISION (the precision
# policy of functions without PRECISION: pytorch, the default, times the reference as LibTorch runs
# it by default (cuDNN convolutions in TF32, matmuls in fp32); strict times it in fp32 everywhere;
# tf32 and bf16 accept those kernels' error. Correctness is judged against strict fp32 whatever it
# is; the names are tool/task/precision.h's KEVO_PRECISION_LIST, through KernelEvoTables.cmake).
#
# The module's parts: KernelEvoArch.cmake (architecture names), KernelEvoTask.cmake (the task file
# and its hashes), KernelEvoCache.cmake (lookup, search, summary), KernelEvoDispatch.cmake (the
# library per function), templates/ (the generated sources) and KernelEvoTables.cmake (generated
# from the C headers' dtype, init-kind and precision tables).
include_guard(GLOBAL)

# LibTorch's CMake config resets CMAKE_CUDA_ARCHITECTURES to OFF (it passes its own -gencode flags).
# Remember what the project asked for when this module was loaded, usually before find_package(Torch).
if(CMAKE_CUDA_ARCHITECTURES)
  set_property(GLOBAL PROPERTY KERNELEVO_CUDA_ARCHITECTURES_AT_LOAD "${CMAKE_CUDA_ARCHITECTURES}")
endif()

if(CMAKE_VERSION VERSION_LESS 3.20)
  message(FATAL_ERROR "KernelEvo needs CMake 3.20 or newer (string(JSON), cmake_path); this is ${CMAKE_VERSION}")
endif()

option(KERNELEVO_SEARCH "Run `kernelevo search` in the next configure for missing or stale cached kernels (resets itself)" OFF)
option(KERNELEVO_REQUIRE_KERNELS "Fail configure when a function lacks a valid cached kernel for an architecture" OFF)
set(KERNELEVO_EXECUTABLE "" CACHE FILEPATH
  "kernelevo program that checks cached kernels and runs configure-time searches (default: the package's, else PATH)")
set(KERNELEVO_SEARCH_OPTIONS "" CACHE STRING
  "Extra arguments for every configure-time `kernelevo search` (a ;-list, e.g. --model;google/gemini-3-flash;--budget-usd;5)")
set(KERNELEVO_SEARCH_BUDGET_USD "2" CACHE STRING
  "Spending cap of each configure-time search (per function and architecture) unless the options give --budget-usd")
set(KERNELEVO_SEARCH_MAX_TIME "1h" CACHE STRING
  "Time cap of each configure-time search (per function and architecture) unless the options give --max-time")
set(KERNELEVO_MIN_SPEEDUP "1.0" CACHE STRING
  "A cached kernel measured slower than this over its reference is kept out and the reference built (0: none is)")
set(KERNELEVO_TORCH_CUDA "AUTO" CACHE STRING
  "Whether LibTorch has CUDA (kernels run on torch's current stream): AUTO, ON or OFF")
set_property(CACHE KERNELEVO_TORCH_CUDA PROPERTY STRINGS AUTO ON OFF)

# The generated contract tables: beside this file in an installed package; the build tree's (set by
# KernelEvo's own configure, or by its build-tree package config) otherwise.
if(NOT DEFINED KERNELEVO_TABLES_FILE)
  set(KERNELEVO_TABLES_FILE "${CMAKE_CURRENT_LIST_DIR}/KernelEvoTables.cmake")
endif()
if(NOT EXISTS "${KERNELEVO_TABLES_FILE}")
  message(FATAL_ERROR "KernelEvo: ${KERNELEVO_TABLES_FILE} does not exist (it is generated by KernelEvo's configure)")
endif()
set_property(GLOBAL PROPERTY KERNELEVO_TABLES_FILE "${KERNELEVO_TABLES_FILE}")
# The default precision policy: the table's first (pytorch); an unknown one fails here, at configure.
include("${KERNELEVO_TABLES_FILE}")
list(GET KERNELEVO_PRECISIONS 0 _kevo_default_precision)
set(KERNELEVO_PRECISION "${_kevo_default_precision}" CACHE STRING
  "Precision policy of every kernelevo_optimize() without PRECISION (one of: ${KERNELEVO_PRECISIONS})")
set_property(CACHE KERNELEVO_PRECISION PROPERTY STRINGS ${KERNELEVO_PRECISIONS})
if(NOT KERNELEVO_PRECISION IN_LIST KERNELEVO_PRECISIONS)
  list(JOIN KERNELEVO_PRECISIONS ", " _kevo_p)
  message(FATAL_ERROR "KernelEvo: KERNELEVO_PRECISION: unknown precision policy '${KERNELEVO_PRECISION}' (expected one of: ${_kevo_p})")
endif()
set_property(GLOBAL PROPERTY KERNELEVO_TEMPLATE_DIR "${CMAKE_CURRENT_LIST_DIR}/templates")

# A configure WARNING printed as written: the leading space keeps CMake from re-wrapping it, so a
# command in it stays on one line and can be copied.
# The arguments are joined as they are (a ';' inside one is kept).
function(_kevo_warning)
  set(_text "")
  math(EXPR _last "${ARGC} - 1")
  foreach(_i RANGE ${_last})
    string(APPEND _text "${ARGV${_i}}")
  endforeach()
  message(WARNING " ${_text}")
endfunction()

include("${CMAKE_CURRENT_LIST_DIR}/KernelEvoArch.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/KernelEvoTask.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/KernelEvoCache.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/KernelEvoDispatch.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/KernelEvoModel.cmake")

# ---- the public function --------------------------------------------------------------------

function(kernelevo_optimize NAME)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "REQUIRED"
    "TARGET;REFERENCE;FUNCTION;CACHE_DIR;NAMESPACE;RETURNS;TRIALS;FLOPS;PRECISION;TASK;MIN_SPEEDUP"
    "INPUTS;OUTPUTS;SHAPES;ARCHITECTURES;TOLERANCE;SEARCH_OPTIONS;TIMING_SHAPES;TIMING_WEIGHTS")
  set(_fn "kernelevo_optimize(${NAME})")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${_fn}: unexpected arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT NAME MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "kernelevo_optimize: '${NAME}' is not a C identifier (it names the generated function)")
  endif()
  if(NAME MATCHES "^(abi|arch|runtime|aten_dispatch|kernelevo)$")
    message(FATAL_ERROR "${_fn}: the name '${NAME}' is reserved by KernelEvo's headers")
  endif()
  if(ARG_TASK)
    # The task file says all of it: its tensors, shapes, tolerance, precision and reference.
    foreach(_own REFERENCE FUNCTION INPUTS OUTPUTS SHAPES TOLERANCE TIMING_SHAPES TIMING_WEIGHTS FLOPS PRECISION TRIALS)
      if(DEFINED ARG_${_own})
        message(FATAL_ERROR "${_fn}: ${_own} is the task file's with TASK (edit ${ARG_TASK} or leave TASK out)")
      endif()
    endforeach()
    set(_reqs CACHE_DIR)
  else()
    set(_reqs REFERENCE INPUTS OUTPUTS CACHE_DIR)
  endif()
  foreach(_req IN LISTS _reqs)
    if(NOT ARG_${_req})
      message(FATAL_ERROR "${_fn}: ${_req} is required")
    endif()
  endforeach()
  if(ARG_TARGET)
    if(NOT TARGET ${ARG_TARGET})
      message(FATAL_ERROR "${_fn}: TARGET ${ARG_TARGET} is not a target (call kernelevo_optimize() after add_executable/add_library)")
    endif()
    get_target_property(_aliased ${ARG_TARGET} ALIASED_TARGET)
    if(_aliased)
      set(ARG_TARGET "${_aliased}")
    endif()
  endif()
  get_property(_known GLOBAL PROPERTY KERNELEVO_FUNCTIONS)
  if(NAME IN_LIST _known)
    message(FATAL_ERROR "${_fn}: a function named '${NAME}' is already optimized in this build; names must be unique")
  endif()
  set_property(GLOBAL APPEND PROPERTY KERNELEVO_FUNCTIONS "${NAME}")
  if(NOT TARGET KernelEvo::runtime)
    message(FATAL_ERROR "${_fn}: KernelEvo::runtime is not defined: use find_package(KernelEvo) or add_subdirectory(<kernelevo>)")
  endif()

  if(NOT DEFINED ARG_NAMESPACE)
    set(ARG_NAMESPACE kernelevo)
  endif()
  if(NOT ARG_NAMESPACE STREQUAL "" AND NOT ARG_NAMESPACE MATCHES "^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$")
    message(FATAL_ERROR "${_fn}: NAMESPACE '${ARG_NAMESPACE}' is not a C++ namespace")
  endif()
  if(ARG_TASK)
    get_filename_component(_task_in "${ARG_TASK}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    _kevo_find_executable(_task_exe)
    _kevo_read_task_file(${NAME} "${_task_in}" "${_task_exe}" _t)
    set(ARG_FUNCTION "${_t_REF_FUNCTION}")
    set(ARG_REFERENCE "${_t_REF_SOURCE}")
  endif()
  if(NOT ARG_FUNCTION)
    set(ARG_FUNCTION "${NAME}")
  endif()
  string(REGEX REPLACE "^::" "" ARG_FUNCTION "${ARG_FUNCTION}")
  if(NOT ARG_FUNCTION MATCHES "^[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)*$")
    message(FATAL_ERROR "${_fn}: FUNCTION '${ARG_FUNCTION}' is not a C++ function name")
  endif()
  if(ARG_FUNCTION STREQUAL "${ARG_NAMESPACE}::${NAME}" OR (ARG_NAMESPACE STREQUAL "" AND ARG_FUNCTION STREQUAL NAME))
    message(FATAL_ERROR "${_fn}: the generated function ${ARG_NAMESPACE}::${NAME} would have the reference's name; "
      "set NAMESPACE or FUNCTION so they differ")
  endif()
  if(NOT ARG_RETURNS)
    set(ARG_RETURNS TUPLE)
  endif()
  if(NOT ARG_RETURNS MATCHES "^(TUPLE|VECTOR)$")
    message(FATAL_ERROR "${_fn}: RETURNS must be TUPLE or VECTOR")
  endif()
  if(NOT DEFINED ARG_TRIALS)
    set(ARG_TRIALS 5)
  endif()
  if(NOT ARG_TRIALS MATCHES "^[1-9][0-9]*$" OR ARG_TRIALS GREATER 1000)
    message(FATAL_ERROR "${_fn}: TRIALS must be an integer between 1 and 1000")
  endif()

  get_filename_component(_ref "${ARG_REFERENCE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${_ref}")
    message(FATAL_ERROR "${_fn}: REFERENCE ${_ref} does not exist")
  endif()
  get_filename_component(_cache "${ARG_CACHE_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(DEFINED ARG_MIN_SPEEDUP)
    _kevo_check_min_speedup("${ARG_MIN_SPEEDUP}" "${_fn}: MIN_SPEEDUP")
    set(_min_speedup "${ARG_MIN_SPEEDUP}")
    set(_min_what "MIN_SPEEDUP")
  else()
    _kevo_check_min_speedup("${KERNELEVO_MIN_SPEEDUP}" "KERNELEVO_MIN_SPEEDUP")
    set(_min_speedup "${KERNELEVO_MIN_SPEEDUP}")
    set(_min_what "KERNELEVO_MIN_SPEEDUP")
  endif()

  if(NOT ARG_TASK)
    _kevo_write_task(${NAME} FUNCTION "${ARG_FUNCTION}" REFERENCE "${_ref}" TRIALS "${ARG_TRIALS}" OUT _t
      INPUTS ${ARG_INPUTS} OUTPUTS ${ARG_OUTPUTS} SHAPES ${ARG_SHAPES} TOLERANCE ${ARG_TOLERANCE}
      TIMING_SHAPES ${ARG_TIMING_SHAPES} TIMING_WEIGHTS ${ARG_TIMING_WEIGHTS} FLOPS "${ARG_FLOPS}" PRECISION "${ARG_PRECISION}")
  elseif(_t_HASH_ERROR)
    _kevo_warning("KernelEvo: ${NAME}: cached kernels cannot be checked against ${_t_TASK_FILE}: ${_t_HASH_ERROR}; "
      "every architecture runs the reference")
  endif()

  # ---- architectures ------------------------------------------------------------------------
  _kevo_requested_architectures("${ARG_ARCHITECTURES}" "${ARG_TARGET}" _arch_in _arch_from)
  _kevo_expand_architectures("${_arch_in}" _arches _arch_notes)
  foreach(_note IN LISTS _arch_notes)
    _kevo_warning("KernelEvo: ${NAME}: ${_note} (in ${_arch_from}: ${_arch_in})")
  endforeach()
  if(NOT _arches)
    _kevo_warning("KernelEvo: ${NAME}: no CUDA architecture to look up kernels for "
      "(set ARCHITECTURES or CMAKE_CUDA_ARCHITECTURES, e.g. 90): every call runs the reference")
  else()
    list(JOIN _arches " " _arch_text)
    message(STATUS "KernelEvo: ${NAME}: architectures ${_arch_text} (from ${_arch_from}: ${_arch_in})")
  endif()
  set_property(GLOBAL APPEND PROPERTY KERNELEVO_SUMMARY_ARCHES ${_arches})
  if(_arches AND NOT CMAKE_CUDA_COMPILER_LOADED)
    _kevo_warning("${_fn}: the CUDA language is not enabled in this project, so cached kernels cannot be compiled; "
      "every call runs the reference. Add CUDA to project(... LANGUAGES CXX CUDA) or call enable_language(CUDA).")
  endif()

  # ---- lookup (+ optional search) per architecture ------------------------------------------
  _kevo_find_executable(_exe)
  if(_exe)
    set(_exe_shown "${_exe}")
  else()
    set(_exe_shown "kernelevo")
  endif()
  _kevo_search_options("${ARG_SEARCH_OPTIONS}" _search_opts)
  # The printed command must work when pasted: without a model in the options, `kernelevo search`
  # stops with "no model", so the command shows where one goes (MODEL) and the warning says how.
  _kevo_options_name_model("${_search_opts}" _has_model)
  set(_model_words "")
  set(_model_hint "")
  if(NOT _has_model)
    set(_model_words --model MODEL)
    string(CONCAT _model_hint " (MODEL: the LLM that writes the kernels, e.g. google/gemini-3-flash; "
      "-DKERNELEVO_SEARCH_OPTIONS=\"--model;MODEL\" puts it in these commands and in configure-time searches)")
  endif()
  set(_kernels "")    # entries compiled in (dedicated or serving another architecture)
  set(_valid "")      # architectures served by their own entry
  set(_compatible "") # architectures served by a compatible entry
  set(_failed "")
  set(_manifest_arches "")
  _kevo_entries("${_exe}" "${_cache}" "${NAME}" "${_t_TASK_FILE}" "${_min_speedup}" _e)
  if(_e_ERROR AND NOT (ARG_TASK AND _t_HASH_ERROR))  # (that one is said above)
    _kevo_warning("KernelEvo: ${NAME}: the cached kernels in ${_cache}/${NAME} cannot be checked: ${_e_ERROR}; "
      "every architecture runs the reference")
  endif()
  foreach(_arch IN LISTS _arches)
    if(_e_ERROR OR (ARG_TASK AND _t_HASH_ERROR))
      list(APPEND _failed "${_arch}")
      list(APPEND _manifest_arches "    {\"arch\": \"${_arch}\", \"state\": \"unchecked\", \"reason\": \"no verdict\"}")
      continue()
    endif()
    _kevo_arch_verdict(_e "${_arch}" _l)
    set(_words "${_exe_shown}" search --task "${_t_TASK_FILE}" --out "${_cache}" --arch "${_arch}" ${_model_words} ${_search_opts})
    _kevo_shell_join("${_words}" _cmd)
    string(APPEND _cmd "${_model_hint}")
    if(NOT _l_STATE MATCHES "^(valid|kept_out)$" AND KERNELEVO_SEARCH)
      if(NOT _has_model)
        # One error, before any search: every function and architecture would fail the same way.
        message(FATAL_ERROR " KernelEvo: KERNELEVO_SEARCH is ON and ${NAME} ${_arch} is ${_l_STATE}, but no model is configured, "
          "so every configure-time search would stop with \"no model\". Set -DKERNELEVO_SEARCH_OPTIONS=\"--model;NAME\" "
          "(e.g. google/gemini-3-flash; add --llm-url;URL for another server), or SEARCH_OPTIONS --model NAME in ${_fn}, "
          "or -DKERNELEVO_SEARCH=OFF to configure without searching.")
      elseif(NOT _exe)
        _kevo_warning("KernelEvo: ${NAME} ${_arch}: ${_l_STATE}; KERNELEVO_SEARCH is ON but no kernelevo program is built yet "
          "(build the `kernelevo` target and re-run cmake, or set KERNELEVO_EXECUTABLE)")
      elseif(NOT CMAKE_CUDA_COMPILER_LOADED)
        _kevo_warning("KernelEvo: ${NAME} ${_arch}: ${_l_STATE}; not searching: CUDA is not enabled in this project")
      else()
        message(STATUS "KernelEvo: ${NAME} ${_arch}: ${_l_STATE} (${_l_REASON}) -> searching with at most "
          "${KERNELEVO_SEARCH_BUDGET_USD} USD and ${KERNELEVO_SEARCH_MAX_TIME} unless the options say otherwise: ${_cmd}")
        execute_process(COMMAND "${_exe}" search --task "${_t_TASK_FILE}" --out "${_cache}" --arch "${_arch}" ${_search_opts}
          RESULT_VARIABLE _rc)
        if(NOT _rc EQUAL 0)
          _kevo_warning("KernelEvo: ${NAME} ${_arch}: the search failed (exit ${_rc})")
        endif()
        _kevo_entries("${_exe}" "${_cache}" "${NAME}" "${_t_TASK_FILE}" "${_min_speedup}" _e)
        _kevo_arch_verdict(_e "${_arch}" _l)
      endif()
    endif()
    set(_state "${_l_STATE}")
    set(_reason "${_l_REASON}")
    if(_l_STATE STREQUAL "kept_out")
      message(STATUS "KernelEvo: kernel for ${NAME} on ${_arch} kept out (${_min_what} ${_min_speedup}): ${_l_REASON}; "
        "the reference is built")
      list(APPEND _failed "${_arch}")
      _kevo_count(kept_out)
    elseif(NOT CMAKE_CUDA_COMPILER_LOADED)
      if(_l_STATE STREQUAL "valid")
        message(STATUS "KernelEvo: ${NAME} ${_arch}: cached kernel found but CUDA is not enabled -> reference")
      endif()
      list(APPEND _failed "${_arch}")
    elseif(_l_STATE STREQUAL "valid")
      if(_l_SUMMARY)
        message(STATUS "KernelEvo: ${NAME} ${_arch}: cached kernel (${_l_SUMMARY})")
      else()
        message(STATUS "KernelEvo: ${NAME} ${_arch}: cached kernel")
      endif()
      list(APPEND _valid "${_arch}")
      list(APPEND _kernels "${_arch}")
      _kevo_count(cached)
    else()
      _kevo_compatible_entry(_e "${_arch}" _c)
      if(_l_STATE STREQUAL "missing")
        set(_gap "missing")
        set(_fill "Fill it with")
      else()
        set(_gap "${_l_STATE} (${_l_REASON})")
        set(_fill "Refresh it with")
      endif()
      if(_c_ARCH)
        message(STATUS "KernelEvo: ${NAME} ${_arch}: ${_gap} -> uses the ${_c_ARCH} kernel (binary compatible; ${_c_SUMMARY}). "
          "A dedicated kernel would win: ${_cmd}")
        list(APPEND _compatible "${_arch}")
        list(APPEND _kernels "${_c_ARCH}")
        set(_state "compatible")
        set(_reason "uses ${_c_ARCH}")
        _kevo_count(compatible)
      else()
        _kevo_warning("KernelEvo: ${NAME} ${_arch}: ${_gap} -> reference. ${_fill}: ${_cmd}")
        list(APPEND _failed "${_arch}")
        _kevo_count(${_l_STATE})
      endif()
    endif()
    string(REPLACE "\"" "'" _reason_json "${_reason}")
    # One JSON string: a reason may quote a parser's lines (a metadata file of NaN) or hold a backslash.
    string(REPLACE "\\" "\\\\" _reason_json "${_reason_json}")
    string(REGEX REPLACE "[\r\n\t]+ *" " " _reason_json "${_reason_json}")
    list(APPEND _manifest_arches "    {\"arch\": \"${_arch}\", \"state\": \"${_state}\", \"reason\": \"${_reason_json}\"}")
  endforeach()
  list(REMOVE_DUPLICATES _kernels)
  list(SORT _kernels)
  list(JOIN _manifest_arches ",\n" KEVO_LOOKUP_ARCHES)
  set(KEVO_LOOKUP_FUNCTION "${NAME}")
  set(KEVO_LOOKUP_TASK "${_t_TASK_FILE}")
  set(KEVO_LOOKUP_TASK_HASH "${_t_TASK_HASH}")
  set(KEVO_LOOKUP_REF_HASH "${_t_REF_HASH}")
  set(KEVO_LOOKUP_CACHE_DIR "${_cache}")
  set(KEVO_LOOKUP_MIN_SPEEDUP "${_min_speedup}")
  _kevo_configure_template(lookup.json.in "${CMAKE_BINARY_DIR}/kernelevo/${NAME}/lookup.json")

  if(_failed AND (KERNELEVO_REQUIRE_KERNELS OR ARG_REQUIRED))
    message(FATAL_ERROR "${_fn}: no valid cached kernel for ${_failed} and kernels are required "
      "(KERNELEVO_REQUIRE_KERNELS or REQUIRED). Fill the cache with `kernelevo search` or `kernelevo cache add`.")
  endif()

  # ---- the library target per function -----------------------------------------------------
  _kevo_add_function_library(${NAME} TASK _t NAMESPACE "${ARG_NAMESPACE}" FUNCTION "${ARG_FUNCTION}"
    REFERENCE "${_ref}" RETURNS "${ARG_RETURNS}" CACHE_DIR "${_cache}" REFERENCE_IN "${ARG_TARGET}"
    SIGNATURE "${_t_REF_SIGNATURE}" SETUP "${_t_REF_SETUP}" SETUP_ARG "${_t_REF_ARG}" KERNELS ${_kernels})
  if(ARG_TARGET)
    _kevo_link_into(${ARG_TARGET} kernelevo_${NAME})
  endif()

  # Re-run configure when the reference or the cache entries change (staleness is decided here),
  # and when an entry appears: depend on the function's folder, else on CACHE_DIR, else on the
  # nearest folder above it that exists (`kernelevo cache add` creates the missing ones).
  set(_deps "${_ref}" ${_t_REF_DEPS})
  file(GLOB _entries "${_cache}/${NAME}/sm_*.cu" "${_cache}/${NAME}/sm_*.json" "${_cache}/${NAME}/sm_*.py")
  list(APPEND _deps ${_entries})
  set(_watch "${_cache}/${NAME}")
  while(NOT IS_DIRECTORY "${_watch}")
    get_filename_component(_up "${_watch}" DIRECTORY)
    if(_up STREQUAL _watch)
      break()
    endif()
    set(_watch "${_up}")
  endwhile()
  list(APPEND _deps "${_watch}")
  if(NOT _watch STREQUAL "${_cache}/${NAME}" AND IS_DIRECTORY "${_cache}")
    list(APPEND _deps "${_cache}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_deps})

  # For callers: what was found.
  set(KERNELEVO_${NAME}_ARCHITECTURES "${_valid}" PARENT_SCOPE)
  set(KERNELEVO_${NAME}_COMPATIBLE "${_compatible}" PARENT_SCOPE)
  set(KERNELEVO_${NAME}_MISSING "${_failed}" PARENT_SCOPE)
  set(KERNELEVO_${NAME}_TASK "${_t_TASK_FILE}" PARENT_SCOPE)
  set(KERNELEVO_${NAME}_HEADER "${_t_HEADER}" PARENT_SCOPE)
  set(KERNELEVO_${NAME}_LIBRARY kernelevo_${NAME} PARENT_SCOPE)
endfunction()

# The PyTorch operator library (documented above; KernelEvoDispatch.cmake builds it).
function(kernelevo_torch_library TARGET)
  _kevo_add_torch_library(${TARGET} ${ARGN})
endfunction()
