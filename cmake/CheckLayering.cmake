# Checks that each source folder includes only the folders below it (DESIGN.md: dependencies point
# one way). Run as a script:  cmake -DROOT=<source root> -P cmake/CheckLayering.cmake
# Fails (and lists every offending file, line and include) when a folder includes a project folder
# it may not depend on. Includes of other libraries (absl, grpcpp, ...) are not checked here.
#
# The rule table: folder -> the project folders its files may include ("gravac/v1/..." is the
# generated code of proto/, "gravac/gravac.h(pp)" the client's public headers).
cmake_minimum_required(VERSION 3.25)

set(GRAVAC_LAYERS
  "core:core"
  "kernels:core,kernels"
  "proto:core,proto"
  "controller:core,proto,controller"
  "daemon:core,kernels,proto,daemon"
  "client:core,proto,client"
  "netemu:core,netemu"
  "runner:core,netemu,runner")
set(GRAVAC_PROJECT_FOLDERS core kernels proto controller daemon client netemu runner bench tests
  examples)

if(NOT ROOT)
  message(FATAL_ERROR "CheckLayering: pass -DROOT=<source root>")
endif()

set(violations "")
set(checked 0)
foreach(layer ${GRAVAC_LAYERS})
  string(REPLACE ":" ";" parts "${layer}")
  list(GET parts 0 folder)
  list(GET parts 1 allowed)
  string(REPLACE "," ";" allowed "${allowed}")
  file(GLOB_RECURSE files LIST_DIRECTORIES false
    "${ROOT}/${folder}/*.h" "${ROOT}/${folder}/*.hpp" "${ROOT}/${folder}/*.cc"
    "${ROOT}/${folder}/*.c" "${ROOT}/${folder}/*.cu" "${ROOT}/${folder}/*.cuh")
  foreach(f ${files})
    math(EXPR checked "${checked} + 1")
    file(STRINGS "${f}" includes REGEX "^[ \t]*#[ \t]*include[ \t]+\"")
    foreach(line ${includes})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]*)\".*" "\\1" path "${line}")
      if(path MATCHES "^gravac/v1/")
        set(target proto)
      elseif(path MATCHES "^gravac/gravac\\.(h|hpp)$")
        set(target client)
      elseif(path MATCHES "^([a-z_]+)/")
        set(target "${CMAKE_MATCH_1}")
        if(NOT target IN_LIST GRAVAC_PROJECT_FOLDERS)
          continue()  # another library's header
        endif()
      else()
        continue()  # same-folder include without a path
      endif()
      if(NOT target IN_LIST allowed)
        file(RELATIVE_PATH rel "${ROOT}" "${f}")
        string(APPEND violations "  ${rel}: ${folder}/ may not include \"${path}\" (${target}/)\n")
      endif()
    endforeach()
  endforeach()
endforeach()

if(checked EQUAL 0)
  message(FATAL_ERROR "CheckLayering: no source files under ${ROOT}")
endif()
if(violations)
  message(FATAL_ERROR "CheckLayering: includes against the layering:\n${violations}")
endif()
message(STATUS "CheckLayering: ${checked} files follow the layering")
