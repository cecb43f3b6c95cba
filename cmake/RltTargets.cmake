# Common settings for every rlt target: warnings, sanitizers, include roots.
set(RLT_SANITIZER_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)

function(rlt_target_defaults target)
  # Host-compiler flags go to C++ sources only; nvcc forwards its own warnings to the host compiler.
  # Kernels keep line tables (-lineinfo: no effect on the code) so that compute-sanitizer and
  # profilers name source lines.
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
                                           $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra -lineinfo>)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR}/include)
  # A unity build includes the sources into one file, and GCC then judges each as a header: a
  # class of a source (a pimpl's Impl) holding a type of that source's anonymous namespace draws
  # -Wsubobject-linkage, a cross-translation-unit hazard that cannot arise from a file compiled
  # once.
  if(CMAKE_UNITY_BUILD)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-subobject-linkage>)
  endif()
  if(RLT_SANITIZE)
    # -Wno-maybe-uninitialized: the instrumentation confuses GCC 12's flow analysis, which then
    # reports libstdc++'s own std::regex automaton (the tests' regex oracles) as reading an
    # uninitialized std::function; the release build keeps the warning.
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${RLT_SANITIZER_FLAGS}>
                                             $<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>)
    target_link_options(${target} PUBLIC -fsanitize=address,undefined)
  endif()
endfunction()

# rlt_source_folder_include(TARGET VISIBILITY) — makes the headers of the src/ folder this
# CMakeLists.txt sits in reachable as "<folder>/x.h", and only them: the include root holds one
# link, to this folder. Modules publish theirs (PUBLIC), so a module's headers are reachable
# exactly from the targets that link it, and an #include across the layering fails to build.
function(rlt_source_folder_include target visibility)
  file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR})
  set(root ${CMAKE_BINARY_DIR}/module_include/${target})
  get_filename_component(parent ${root}/${folder} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT EXISTS ${root}/${folder})
    file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR} ${root}/${folder} SYMBOLIC)
  endif()
  target_include_directories(${target} ${visibility} ${root})
endfunction()

# rlt_module(NAME SOURCES... DEPS ...) — one static library per module folder; DEPS are the
# modules (and packages) whose headers it may include.
function(rlt_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(rlt_${name} STATIC ${ARG_SOURCES})
  rlt_target_defaults(rlt_${name})
  rlt_source_folder_include(rlt_${name} PUBLIC)
  target_link_libraries(rlt_${name} PUBLIC ${ARG_DEPS})
endfunction()

# rlt_test(NAME SOURCES... DEPS ... [LABELS ...]) — one GoogleTest executable registered with
# ctest. Label `slow` keeps a suite out of the sanitizer pass (see CMakePresets.json).
function(rlt_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  rlt_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_compile_definitions(${name} PRIVATE RLT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  include(GoogleTest)
  # One label per suite: gtest_discover_tests flattens list-valued properties.
  set(label unit)
  if(ARG_LABELS)
    set(label ${ARG_LABELS})
  endif()
  # ctest -j starts the costliest tests first; a fresh clone has no timings yet, so slow suites say
  # so (else one starting last keeps a core busy alone at the end).
  set(cost 0)
  if(label STREQUAL "slow")
    set(cost 100)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST
    PROPERTIES ENVIRONMENT "RLT_SOURCE_DIR=${PROJECT_SOURCE_DIR}" LABELS ${label} COST ${cost})
endfunction()
