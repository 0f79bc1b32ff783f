# gravac_target_warnings(target): the project's warning set for C++ targets. With clang, also
# -Wthread-safety: the ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED annotations on absl::Mutex
# members (Coordinator, ControllerClient, the controller's streams, ...) are then checked at
# compile time; gcc ignores the annotations.
function(gravac_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter -Wno-sign-compare>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:Clang>>:-Wthread-safety>)
endfunction()
