# Sanitizer and fuzzing instrumentation for whole build trees of their own (scripts/sanitize.sh,
# scripts/fuzz.sh); a normal build sets neither GRAVAC_SANITIZE nor GRAVAC_BUILD_FUZZ.
#   GRAVAC_SANITIZE=address,undefined   ASan + UBSan, UB is fatal (-fno-sanitize-recover)
#   GRAVAC_SANITIZE=thread              TSan
#   GRAVAC_BUILD_FUZZ=ON                clang only: -fsanitize=fuzzer-no-link on every target
#                                       (libFuzzer's coverage), address,undefined by default
if(GRAVAC_BUILD_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "GRAVAC_BUILD_FUZZ needs clang (CC=clang CXX=clang++): libFuzzer is "
                        "clang's; got ${CMAKE_CXX_COMPILER_ID}")
  endif()
  if(GRAVAC_SANITIZE STREQUAL "")
    set(GRAVAC_SANITIZE "address,undefined")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
if(NOT GRAVAC_SANITIZE STREQUAL "")
  add_compile_options(-fsanitize=${GRAVAC_SANITIZE} -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=${GRAVAC_SANITIZE})
  if(GRAVAC_SANITIZE MATCHES "undefined")
    # A UB report fails the test or the fuzz run instead of scrolling by.
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
  message(STATUS "gravac: sanitizers ${GRAVAC_SANITIZE}")
endif()
