# gravac_target_warnings(target): the project's warning set for C++ targets.
function(gravac_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-sign-compare>)
endfunction()
