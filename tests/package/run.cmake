# Installs the build under test into a fresh prefix, builds tests/package against it with
# find_package(nuvec), and runs the program. Arguments: BUILD_DIR, SOURCE_DIR, WORK_DIR.
file(REMOVE_RECURSE ${WORK_DIR})
function(step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  set(step_output "${out}" PARENT_SCOPE)
endfunction()
step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix)
step("configure" ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${WORK_DIR}/app -G Ninja
     -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release)
step("build" ${CMAKE_COMMAND} --build ${WORK_DIR}/app)
step("run" ${WORK_DIR}/app/app)
if(NOT step_output MATCHES "array\\(\\[2, -4, 6\\], dtype=float32\\)")
  message(FATAL_ERROR "unexpected output: ${step_output}")
endif()
# The program must run from the installed library, not the build tree.
execute_process(COMMAND ldd ${WORK_DIR}/app/app OUTPUT_VARIABLE libs)
if(NOT libs MATCHES "${WORK_DIR}/prefix/[^ ]*libnuvec")
  message(FATAL_ERROR "the program does not use the installed libnuvec:\n${libs}")
endif()
message(STATUS "installed package: ${step_output}")
