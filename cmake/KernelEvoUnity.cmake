# Unity builds for KernelEvo's own C++ targets (KERNELEVO_UNITY_BUILD, docs/development.md "Build
# time"). Almost every source includes nlohmann/json.hpp, many CLI11 or GoogleTest, and at -O3 most
# of a source's compile time is spent generating the same inline code of those headers again (the
# JSON parser and serializer, CLI11's App and Formatter): compiling a target's sources in batches
# generates it once per batch. Not part of the installed package.

# kevo_unity_build(DIR...): sets UNITY_BUILD on every C++ target defined in DIR and its subfolders.
# A source compiles on its own (SKIP_UNITY_BUILD_INCLUSION) where it #defines a macro it does not
# #undef (the macro would leak into the sources after it in its batch), or where it is listed below:
# it defines a helper in an anonymous namespace under the same name as another source of its target
# (a unity batch fails to compile with "redefinition of" or "ambiguous"; list the later source).
set(KEVO_UNITY_SEPARATE
  tool/cli/reference.cpp
  tool/llm/transcript.cpp
  tool/store/redis_store.cpp
  tool/store/writer.cpp
  tool/validate/accuracy.cpp
  tool/validate/gpu_lock.cpp
  tool/worker/remote_evaluator.cpp
  tests/kernelbench/import_isolation_test.cpp
  tests/model/gains_test.cpp)

function(kevo_unity_build)
  foreach(dir IN LISTS ARGN)
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
        set_target_properties(${target} PROPERTIES UNITY_BUILD ON)
        # GCC warns about a TEST_F's anonymous-namespace fixture once the test file is included
        # from the batch file; the warning is about the main file, not the code.
        if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
          target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-subobject-linkage>)
        endif()
        _kevo_unity_separate_sources(${target} "${dir}")
      endif()
    endforeach()
    get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    if(subdirs)
      kevo_unity_build(${subdirs})
    endif()
  endforeach()
endfunction()

function(_kevo_unity_separate_sources target dir)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  foreach(src IN LISTS sources)
    if(NOT src MATCHES "\\.(cpp|cc|cxx)$" OR src MATCHES "^\\$<")
      continue()
    endif()
    if(IS_ABSOLUTE "${src}")
      set(path "${src}")
    else()
      set(path "${source_dir}/${src}")
    endif()
    if(NOT EXISTS "${path}")
      continue()
    endif()
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${path}")
    if(rel IN_LIST KEVO_UNITY_SEPARATE)
      set_source_files_properties("${path}" DIRECTORY "${dir}" PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
      continue()
    endif()
    file(STRINGS "${path}" lines REGEX "^[ \t]*#[ \t]*(define|undef)[ \t]+[A-Za-z_]")
    set(defined "")
    set(undefined "")
    foreach(line IN LISTS lines)
      if(line MATCHES "^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)")
        list(APPEND defined ${CMAKE_MATCH_1})
      elseif(line MATCHES "^[ \t]*#[ \t]*undef[ \t]+([A-Za-z_][A-Za-z0-9_]*)")
        list(APPEND undefined ${CMAKE_MATCH_1})
      endif()
    endforeach()
    if(defined AND undefined)
      list(REMOVE_ITEM defined ${undefined})
    endif()
    if(defined)
      set_source_files_properties("${path}" DIRECTORY "${dir}" PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endforeach()
endfunction()
