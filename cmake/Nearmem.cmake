# Build conventions shared by every nearmem component.
#
#   nearmem_add_library(<name> SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
#       -> static library target nearmem_<name>, installed, listed in nearmem.pc
#   nearmem_add_test(<name> SOURCES ... [LIBS ...] [LABELS ...] [ARGS ...] [TIMEOUT s])
#       -> cmocka test executable build/tests/test_<name>, registered with CTest
#   nearmem_add_bench_suite(NAME <suite> FUNCTION <c_fn> SOURCES ... [LIBS ...])
#       -> suite <suite> of build/bin/nearmem-bench, implemented by int c_fn(nm_bench *)
#   nearmem_add_demo_step(NAME <step> ORDER <n> FUNCTION <c_fn> SOURCES ... [LIBS ...])
#       -> step of `nearmem demo`, implemented by int c_fn(nm_demo *), run in ORDER
#   nearmem_add_dpu_program(<name> SOURCES ... [DEFINES NR_TASKLETS=16 ...] [INCLUDES ...] [FLAGS ...]
#                           [OUTPUT <path>])
#       -> DPU program file build/dpu/<name> (or <path>; plain UPMEM C, built by nearmem-dpu-cc),
#          target dpu_<name>; load it with dpu_load(set, "<path>", &program)
#   nearmem_add_dpu_host(<target> SOURCES ... [LIBS ...])
#       -> executable of an UPMEM host program (#include <dpu.h> etc.), linked with nearmem_pim
#   nearmem_embed_dpu_program(<target> <name>)
#       -> links build/dpu/<name> into <target> as `struct dpu_incbin_t nm_dpu_incbin_<name>`
#          (extern in nearmem/pim/host.h style), for dpu_load_from_incbin
#
# CTest labels in use: unit, stress, threads (run under TSan by `make tsan`),
# crash, nosanitize (skipped by `make sanitize`), preload.

macro(nearmem_setup_flags)
  add_compile_options(-Wall -Wextra)
  add_compile_definitions(_GNU_SOURCE)
  if(NEARMEM_WERROR)
    add_compile_options(-Werror)
  endif()
  if(NEARMEM_SANITIZE)
    string(REPLACE "," ";" _san_list "${NEARMEM_SANITIZE}")
    foreach(_s IN LISTS _san_list)
      if(NOT _s MATCHES "^(address|undefined|thread|leak)$")
        message(FATAL_ERROR "NEARMEM_SANITIZE: unknown sanitizer '${_s}'")
      endif()
    endforeach()
    add_compile_options(-fsanitize=${NEARMEM_SANITIZE} -fno-omit-frame-pointer
                        -fno-sanitize-recover=all -g)
    add_link_options(-fsanitize=${NEARMEM_SANITIZE})
    add_compile_definitions(NEARMEM_SANITIZED=1)
    if(NEARMEM_SANITIZE MATCHES "thread")
      add_compile_definitions(NEARMEM_TSAN=1)
    endif()
  endif()
endmacro()

macro(nearmem_find_dependencies)
  find_package(PkgConfig REQUIRED)
  find_package(Threads REQUIRED)
  if(NEARMEM_BUILD_TESTS)
    pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
  endif()
  # Python with matplotlib for --plot: Debian's interpreter, not a pyenv shim.
  find_program(NEARMEM_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT NEARMEM_PYTHON)
    find_program(NEARMEM_PYTHON NAMES python3)
  endif()
endmacro()

function(nearmem_add_subdirs parent)
  file(GLOB _children RELATIVE ${PROJECT_SOURCE_DIR}/${parent} ${PROJECT_SOURCE_DIR}/${parent}/*)
  list(SORT _children)
  foreach(_c IN LISTS _children)
    if(EXISTS ${PROJECT_SOURCE_DIR}/${parent}/${_c}/CMakeLists.txt)
      add_subdirectory(${parent}/${_c})
    endif()
  endforeach()
endfunction()

function(nearmem_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(nearmem_${name} STATIC ${A_SOURCES})
  target_include_directories(nearmem_${name}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(nearmem_${name} PUBLIC ${A_DEPS} PRIVATE ${A_PRIVATE_DEPS})
  set_property(GLOBAL APPEND PROPERTY NEARMEM_LIBRARIES nearmem_${name})
  # System libraries go on nearmem.pc's link line: the libraries are static.
  foreach(_d IN LISTS A_DEPS A_PRIVATE_DEPS)
    set(_flag "")
    if(_d MATCHES "^nearmem_" OR _d STREQUAL "Threads::Threads")
      # internal target, or -lpthread (always on the line)
    elseif(_d MATCHES "^PkgConfig::(.+)$")
      foreach(_l IN LISTS ${CMAKE_MATCH_1}_LIBRARIES)
        set_property(GLOBAL APPEND PROPERTY NEARMEM_PKGCONFIG_PRIVATE "-l${_l}")
      endforeach()
    elseif(_d MATCHES "/lib([^/]+)\\.(so|a)[.0-9]*$")
      set(_flag "-l${CMAKE_MATCH_1}")
    elseif(_d MATCHES "^[A-Za-z0-9_+.-]+$" AND NOT TARGET ${_d})
      set(_flag "-l${_d}")
    endif()
    if(_flag)
      set_property(GLOBAL APPEND PROPERTY NEARMEM_PKGCONFIG_PRIVATE "${_flag}")
    endif()
  endforeach()
  install(TARGETS nearmem_${name} EXPORT nearmem-targets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()

function(nearmem_add_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  add_executable(test_${name} ${A_SOURCES})
  target_link_libraries(test_${name} PRIVATE ${A_LIBS} PkgConfig::CMOCKA Threads::Threads)
  target_include_directories(test_${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests/include)
  set_target_properties(test_${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND test_${name} ${A_ARGS})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  set_tests_properties(${name} PROPERTIES LABELS "${A_LABELS}" TIMEOUT ${A_TIMEOUT}
    ENVIRONMENT "NEARMEM_SOURCE_DIR=${PROJECT_SOURCE_DIR};NEARMEM_BINARY_DIR=${PROJECT_BINARY_DIR}")
endfunction()

function(_nearmem_register kind)
  cmake_parse_arguments(A "" "NAME;FUNCTION;ORDER" "SOURCES;LIBS" ${ARGN})
  if(NOT A_NAME OR NOT A_FUNCTION OR NOT A_SOURCES)
    message(FATAL_ERROR "nearmem_add_${kind}: NAME, FUNCTION and SOURCES are required")
  endif()
  string(MAKE_C_IDENTIFIER "nm${kind}_${A_NAME}" _lib)
  add_library(${_lib} STATIC ${A_SOURCES})
  target_include_directories(${_lib} PRIVATE ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${_lib} PUBLIC nearmem_common ${A_LIBS})
  if(NOT A_ORDER)
    set(A_ORDER 500)
  endif()
  math(EXPR _ord "${A_ORDER} + 10000")  # zero-padded sort key
  set_property(GLOBAL APPEND PROPERTY NEARMEM_${kind}_ENTRIES "${_ord}|${A_NAME}|${A_FUNCTION}|${_lib}")
endfunction()

function(nearmem_add_bench_suite)
  _nearmem_register(bench_suite ${ARGN})
endfunction()

function(nearmem_add_demo_step)
  _nearmem_register(demo_step ${ARGN})
endfunction()

# A command of the nearmem tool (`nearmem NAME ARGS...`, see include/nearmem/tool.h).
function(nearmem_add_tool_command)
  _nearmem_register(tool_command ${ARGN})
endfunction()

# Writes a C registry table for one kind and returns the libraries to link.
function(_nearmem_write_registry kind ctype out_file out_libs)
  get_property(_entries GLOBAL PROPERTY NEARMEM_${kind}_ENTRIES)
  list(SORT _entries)
  set(_decls "")
  set(_rows "")
  set(_libs "")
  foreach(_e IN LISTS _entries)
    string(REPLACE "|" ";" _f "${_e}")
    list(GET _f 1 _name)
    list(GET _f 2 _fn)
    list(GET _f 3 _lib)
    string(APPEND _decls "int ${_fn}(${ctype} *);\n")
    string(APPEND _rows "    {\"${_name}\", ${_fn}},\n")
    list(APPEND _libs ${_lib})
  endforeach()
  set(_content "/* Generated by cmake/Nearmem.cmake: do not edit. */\n#include <stddef.h>\ntypedef struct ${ctype} ${ctype};\n${_decls}\nstruct nm_registry_entry_${kind} { const char *name; int (*fn)(${ctype} *); };\nconst struct nm_registry_entry_${kind} nm_registry_${kind}[] = {\n${_rows}    {NULL, NULL}\n};\n")
  file(CONFIGURE OUTPUT ${out_file} CONTENT "${_content}" @ONLY)
  set(${out_libs} ${_libs} PARENT_SCOPE)
endfunction()

function(nearmem_generate_tools)
  set(_gen ${PROJECT_BINARY_DIR}/generated)
  _nearmem_write_registry(bench_suite nm_bench ${_gen}/bench_registry.c _bench_libs)
  _nearmem_write_registry(demo_step nm_demo ${_gen}/demo_registry.c _demo_libs)
  _nearmem_write_registry(tool_command nm_tool ${_gen}/tool_registry.c _tool_libs)

  add_executable(nearmem-bench ${PROJECT_SOURCE_DIR}/bench/runner/runner.c
                               ${PROJECT_SOURCE_DIR}/bench/runner/bench_api.c
                               ${_gen}/bench_registry.c)
  target_include_directories(nearmem-bench PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/bench/runner)
  target_link_libraries(nearmem-bench PRIVATE ${_bench_libs} nearmem_common Threads::Threads m)
  target_compile_definitions(nearmem-bench PRIVATE
    NEARMEM_VERSION_STR="${PROJECT_VERSION}"
    NEARMEM_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    NEARMEM_PLOT_SCRIPT_INSTALLED="${CMAKE_INSTALL_FULL_DATADIR}/nearmem/plot.py"
    NEARMEM_PYTHON="${NEARMEM_PYTHON}")

  add_executable(nearmem ${PROJECT_SOURCE_DIR}/tools/nearmem/main.c
                         ${PROJECT_SOURCE_DIR}/tools/nearmem/demo_api.c
                         ${_gen}/demo_registry.c
                         ${_gen}/tool_registry.c)
  target_include_directories(nearmem PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/tools/nearmem)
  target_link_libraries(nearmem PRIVATE ${_demo_libs} ${_tool_libs} nearmem_common Threads::Threads m)
  target_compile_definitions(nearmem PRIVATE NEARMEM_VERSION="${PROJECT_VERSION}")
  install(TARGETS nearmem nearmem-bench RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${PROJECT_SOURCE_DIR}/bench/plot.py DESTINATION ${CMAKE_INSTALL_DATADIR}/nearmem)
endfunction()

function(nearmem_generate_install)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/nearmem DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  get_property(_libs GLOBAL PROPERTY NEARMEM_LIBRARIES)
  # Dependents first so that static linking resolves (nearmem_common last).
  list(REMOVE_ITEM _libs nearmem_common)
  list(REVERSE _libs)
  set(_flags "")
  foreach(_l IN LISTS _libs)
    string(APPEND _flags " -l${_l}")
  endforeach()
  string(APPEND _flags " -lnearmem_common")
  get_property(_priv GLOBAL PROPERTY NEARMEM_PKGCONFIG_PRIVATE)
  if(_priv)
    list(REMOVE_DUPLICATES _priv)
    list(REMOVE_ITEM _priv -lm -lpthread)  # appended last by nearmem.pc.in
  endif()
  string(JOIN " " NEARMEM_PC_LIBS ${_flags})
  string(JOIN " " NEARMEM_PC_PRIVATE ${_priv})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/nearmem.pc.in ${PROJECT_BINARY_DIR}/nearmem.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/nearmem.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endfunction()

function(nearmem_add_dpu_program name)
  cmake_parse_arguments(A "" "OUTPUT" "SOURCES;DEFINES;INCLUDES;FLAGS" ${ARGN})
  if(NOT A_SOURCES)
    message(FATAL_ERROR "nearmem_add_dpu_program(${name}): SOURCES is required")
  endif()
  set(_out ${PROJECT_BINARY_DIR}/dpu/${name})
  if(A_OUTPUT)
    get_filename_component(_out ${A_OUTPUT} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  get_filename_component(_outdir ${_out} DIRECTORY)
  set(_args -O2 -Wall -Wextra ${A_FLAGS})
  if(NEARMEM_WERROR)
    list(APPEND _args -Werror)
  endif()
  foreach(_d IN LISTS A_DEFINES)
    list(APPEND _args -D${_d})
  endforeach()
  foreach(_i IN LISTS A_INCLUDES)
    get_filename_component(_i ${_i} ABSOLUTE)
    list(APPEND _args -I${_i})
  endforeach()
  set(_srcs "")
  foreach(_s IN LISTS A_SOURCES)
    get_filename_component(_s ${_s} ABSOLUTE)
    list(APPEND _srcs ${_s})
  endforeach()
  add_custom_command(OUTPUT ${_out}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${_outdir}
    COMMAND ${NEARMEM_DPU_CC} ${_args} -MD -MF ${_out}.d -o ${_out} ${_srcs}
    DEPENDS ${_srcs} ${NEARMEM_DPU_TOOLCHAIN_DEPS}
    DEPFILE ${_out}.d
    COMMENT "DPU program ${name}" VERBATIM)
  add_custom_target(dpu_${name} ALL DEPENDS ${_out})
endfunction()

function(nearmem_add_dpu_host target)
  cmake_parse_arguments(A "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${target} ${A_SOURCES})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/include/nearmem/upmem/host)
  target_link_libraries(${target} PRIVATE nearmem_pim ${A_LIBS})
endfunction()

function(nearmem_embed_dpu_program target name)
  set(_prog ${PROJECT_BINARY_DIR}/dpu/${name})
  set(_c ${PROJECT_BINARY_DIR}/generated/dpu_incbin_${name}.c)
  file(CONFIGURE OUTPUT ${_c} CONTENT "/* Generated by nearmem_embed_dpu_program: do not edit. */
#include \"nearmem/pim/host.h\"
DPU_INCBIN(nm_dpu_incbin_${name}, \"${_prog}\");
" @ONLY)
  target_sources(${target} PRIVATE ${_c})
  set_source_files_properties(${_c} PROPERTIES OBJECT_DEPENDS ${_prog})
  add_dependencies(${target} dpu_${name})
endfunction()
