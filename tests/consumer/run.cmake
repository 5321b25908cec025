# Installs the already-built wick into a scratch prefix, checks what was installed, then
# configures, builds and runs tests/consumer against it with find_package(wick), the way a
# user's project would: a plain C++ compiler, no nvcc on the PATH, no CUDA toolkit.
#
# What it proves, for a wick built with or without CUDA:
#   - only public headers are installed (no kernels/, no internal ops or attention headers),
#     every quoted include of an installed header names an installed header, and none
#     includes Eigen or a CUDA header;
#   - the package files ask for no CUDA toolkit, no CUDA language and no Eigen; a CUDA build
#     records the CUDA runtime and cuBLAS library files it linked;
#   - the consumer configures and builds with nvcc removed from PATH, its compile commands
#     carry no CUDA include directory, and (CUDA build) its source fails to compile if
#     cuda_runtime.h is visible at all; it links (with the CUDA code when there is some)
#     and runs a view, a matmul, flash_attn_varlen and a backward pass on the CPU.
#
# Inputs (-D): WICK_SOURCE_DIR, WICK_BUILD_DIR, WORK_DIR, CMAKE_GENERATOR, MAKE_PROGRAM, CXX_COMPILER,
# WICK_WITH_CUDA, and for a CUDA build CUDA_INCLUDE_DIRS (a list joined with "|").

cmake_minimum_required(VERSION 3.24)  # IN_LIST and the other policies of the main project

function(fail msg)
  message(FATAL_ERROR "install_consumer: ${msg}")
endfunction()

string(REPLACE "|" ";" CUDA_INCLUDE_DIRS "${CUDA_INCLUDE_DIRS}")
set(prefix ${WORK_DIR}/prefix)
set(build ${WORK_DIR}/build)

# --- install ---------------------------------------------------------------------------
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${WICK_BUILD_DIR} --prefix ${prefix}
                OUTPUT_QUIET RESULT_VARIABLE rc)
if(rc)
  fail("cmake --install failed")
endif()

# --- the installed headers ---------------------------------------------------------------
set(include_root ${prefix}/include/wick)
file(GLOB_RECURSE installed RELATIVE ${include_root} ${include_root}/*)
if(NOT "wick.h" IN_LIST installed OR NOT "ops/ops.h" IN_LIST installed)
  fail("wick.h or ops/ops.h was not installed (installed: ${installed})")
endif()
set(internal ops/op_util.h ops/attention/plan.h ops/attention/dispatch.h ops/attention/cpu.h
    ops/attention/backward.h tensor/cuda_check.h autograd/accumulate.h)
set(headers_cpp "// Every installed header, as a consumer would include it.\n")
foreach(h ${installed})
  if(h MATCHES "^kernels/" OR h IN_LIST internal OR NOT h MATCHES "\\.h$")
    fail("an internal file was installed: include/wick/${h}")
  endif()
  file(STRINGS ${include_root}/${h} includes REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${includes})
    if(line MATCHES "<(Eigen|unsupported/Eigen|cuda|cublas|cuda_runtime|cuda_fp16|cuda_bf16)[^>]*>")
      fail("include/wick/${h} includes a header of a build dependency: ${line}")
    endif()
    if(line MATCHES "\"([^\"]+)\"" AND NOT CMAKE_MATCH_1 IN_LIST installed)
      fail("include/wick/${h} includes \"${CMAKE_MATCH_1}\", which is not installed")
    endif()
  endforeach()
  string(APPEND headers_cpp "#include <${h}>\n")
endforeach()
file(READ ${include_root}/wick.h wick_h)
if(wick_h MATCHES "__has_include")
  fail("wick.h includes its headers conditionally (__has_include)")
endif()

# --- the package files -------------------------------------------------------------------
file(GLOB_RECURSE config_files ${prefix}/*.cmake)
if(NOT config_files)
  fail("no package files were installed")
endif()
set(targets_text "")
foreach(f ${config_files})
  file(READ ${f} text)
  string(APPEND targets_text "${text}")
  foreach(word CUDAToolkit "CUDA::" enable_language nvcc Eigen)
    string(FIND "${text}" "${word}" at)
    if(NOT at EQUAL -1)
      fail("${f} mentions ${word}: a consumer would need it")
    endif()
  endforeach()
endforeach()
if(WICK_WITH_CUDA)
  foreach(lib cudart cublas)
    if(NOT targets_text MATCHES "/lib${lib}[^/;\"]*\\.(so|a)")
      fail("the package of a CUDA build does not record the ${lib} library file it links")
    endif()
  endforeach()
endif()
file(GLOB_RECURSE wick_config ${prefix}/wickConfig.cmake)
get_filename_component(wick_dir "${wick_config}" DIRECTORY)

# --- a consumer with a plain C++ compiler and no nvcc on the PATH ------------------------
set(path "")
set(hidden "")
string(REPLACE ":" ";" path_dirs "$ENV{PATH}")
foreach(dir ${path_dirs})
  if(EXISTS ${dir}/nvcc)
    list(APPEND hidden ${dir})
  else()
    list(APPEND path ${dir})
  endif()
endforeach()
string(REPLACE ";" ":" path "${path}")
set(ENV{PATH} "${path}")
foreach(var CUDACXX CUDA_PATH CUDA_HOME CUDAToolkit_ROOT CPATH C_INCLUDE_PATH CPLUS_INCLUDE_PATH LIBRARY_PATH)
  unset(ENV{${var}})
endforeach()
find_program(nvcc_left nvcc NO_CACHE)
if(nvcc_left)
  fail("nvcc is still found at ${nvcc_left} after removing ${hidden} from PATH")
endif()
message(STATUS "install_consumer: PATH without nvcc (removed: ${hidden})")

file(MAKE_DIRECTORY ${build})
# The source-level check (main.cpp refuses to compile when it can see cuda_runtime.h) only
# means something when the compiler does not find the toolkit's headers on its own, as it
# does when they were copied into a default include directory such as /usr/local/include.
set(no_cuda_headers OFF)
if(WICK_WITH_CUDA)
  file(WRITE ${WORK_DIR}/probe.cpp "#include <cuda_runtime.h>\n")
  execute_process(COMMAND ${CXX_COMPILER} -fsyntax-only ${WORK_DIR}/probe.cpp
                  RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
  if(rc)
    set(no_cuda_headers ON)
  else()
    message(STATUS "install_consumer: ${CXX_COMPILER} sees cuda_runtime.h by default; "
                   "relying on the compile commands and the headers read instead")
  endif()
endif()

file(WRITE ${build}/headers.cpp "${headers_cpp}")
execute_process(COMMAND ${CMAKE_COMMAND} -S ${WICK_SOURCE_DIR}/tests/consumer -B ${build}
                -G ${CMAKE_GENERATOR} -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}
                -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -Dwick_DIR=${wick_dir}
                -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DWICK_CONSUMER_NO_CUDA_HEADERS=${no_cuda_headers}
                OUTPUT_QUIET RESULT_VARIABLE rc)
if(rc)
  fail("configuring the consumer failed")
endif()
file(READ ${build}/CMakeCache.txt cache)
if(cache MATCHES "CUDAToolkit_|CMAKE_CUDA_COMPILER")
  fail("configuring the consumer looked for the CUDA toolkit (see ${build}/CMakeCache.txt)")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${build} RESULT_VARIABLE rc)
if(rc)
  fail("building the consumer failed")
endif()
file(READ ${build}/compile_commands.json commands)
foreach(dir ${CUDA_INCLUDE_DIRS})
  string(FIND "${commands}" "${dir}" at)
  if(NOT at EQUAL -1)
    fail("the consumer was compiled with the CUDA include directory ${dir}")
  endif()
endforeach()
# Every header the compiler read for the consumer, from its dependency output.
if(CMAKE_GENERATOR MATCHES "Ninja")
  execute_process(COMMAND ${MAKE_PROGRAM} -C ${build} -t deps OUTPUT_VARIABLE deps RESULT_VARIABLE rc)
else()
  file(GLOB_RECURSE depfiles ${build}/CMakeFiles/*.d)
  set(deps "")
  foreach(f ${depfiles})
    file(READ ${f} text)
    string(APPEND deps "${text}")
  endforeach()
endif()
if(NOT deps MATCHES "include/wick/wick\\.h")
  fail("could not read which headers the consumer's compilation included")
endif()
if(deps MATCHES "[^ \n]*(cuda_runtime|cuda_bf16|cuda_fp16|cublas_v2|Eigen/Core)[^ \n]*")
  fail("compiling the consumer read ${CMAKE_MATCH_0}")
endif()
execute_process(COMMAND ${build}/consumer RESULT_VARIABLE rc)
if(rc)
  fail("the consumer ran but failed")
endif()
