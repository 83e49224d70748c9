# Install and export: KernelEvo::runtime, KernelEvo::abi, the kernelevo program (KernelEvo::kernelevo,
# exported by tool/cli) and the CMake module, so that both work:
#   find_package(KernelEvo)            from an install tree (or from this build tree: KernelEvo_DIR=<build>)
#   add_subdirectory(<kernelevo>)      kernelevo_optimize() is defined by the include below
include(CMakePackageConfigHelpers)
include("${CMAKE_CURRENT_LIST_DIR}/KernelEvoGenerateTables.cmake")
set(KERNELEVO_TABLES_FILE "${PROJECT_BINARY_DIR}/KernelEvoTables.cmake")
_kevo_generate_tables("${KERNELEVO_TABLES_FILE}")
include("${CMAKE_CURRENT_LIST_DIR}/KernelEvo.cmake")

set(KERNELEVO_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/KernelEvo" CACHE STRING
  "Where the KernelEvo CMake package files are installed (relative to the prefix)")

install(TARGETS kevo_abi kevo_runtime kevo_runtime_cublas EXPORT KernelEvoTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/runtime/include/kernelevo" DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(EXPORT KernelEvoTargets NAMESPACE KernelEvo:: DESTINATION ${KERNELEVO_INSTALL_CMAKEDIR} FILE KernelEvoTargets.cmake)

# The installed config includes the installed module; the build-tree config includes the source one.
set(KERNELEVO_CONFIG_MODULE "\${CMAKE_CURRENT_LIST_DIR}/KernelEvo.cmake")
set(KERNELEVO_CONFIG_TABLES "\${CMAKE_CURRENT_LIST_DIR}/KernelEvoTables.cmake")
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/KernelEvoConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/install-config/KernelEvoConfig.cmake"
  INSTALL_DESTINATION ${KERNELEVO_INSTALL_CMAKEDIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/KernelEvoConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/install-config/KernelEvoConfig.cmake"
  "${PROJECT_BINARY_DIR}/KernelEvoConfigVersion.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/KernelEvo.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/KernelEvoArch.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/KernelEvoTask.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/KernelEvoCache.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/KernelEvoDispatch.cmake"
  "${CMAKE_CURRENT_LIST_DIR}/KernelEvoModel.cmake"
  "${KERNELEVO_TABLES_FILE}"
  DESTINATION ${KERNELEVO_INSTALL_CMAKEDIR})
install(FILES
  "${CMAKE_CURRENT_LIST_DIR}/templates/function.h.in"
  "${CMAKE_CURRENT_LIST_DIR}/templates/dispatch.cpp.in"
  "${CMAKE_CURRENT_LIST_DIR}/templates/task.json.in"
  "${CMAKE_CURRENT_LIST_DIR}/templates/lookup.json.in"
  "${CMAKE_CURRENT_LIST_DIR}/templates/torch_op.inc.in"
  DESTINATION ${KERNELEVO_INSTALL_CMAKEDIR}/templates)

# Build tree: find_package(KernelEvo) with KernelEvo_DIR=<this build dir> uses the targets as built.
export(EXPORT KernelEvoTargets NAMESPACE KernelEvo:: FILE "${PROJECT_BINARY_DIR}/KernelEvoTargets.cmake")
set(KERNELEVO_CONFIG_MODULE "${CMAKE_CURRENT_LIST_DIR}/KernelEvo.cmake")
set(KERNELEVO_CONFIG_TABLES "${KERNELEVO_TABLES_FILE}")
configure_package_config_file("${CMAKE_CURRENT_LIST_DIR}/KernelEvoConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/KernelEvoConfig.cmake"
  INSTALL_DESTINATION "${PROJECT_BINARY_DIR}"
  INSTALL_PREFIX "${PROJECT_BINARY_DIR}")

# The Python helper (export_task, load_op): share/kernelevo/python/kernelevo, beside the KernelBench
# importer it calls (share/kernelevo/kernelbench); users add share/kernelevo/python to PYTHONPATH.
install(DIRECTORY "${PROJECT_SOURCE_DIR}/python/kernelevo" DESTINATION ${CMAKE_INSTALL_DATADIR}/kernelevo/python
  FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
