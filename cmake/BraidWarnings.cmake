# Warning flags and sanitizers, applied to braid's own targets via braid_target_defaults().
set(BRAID_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
    -Woverloaded-virtual -Wimplicit-fallthrough
    # GCC 12 false positives: -Wrestrict on std::string concatenation (GCC PR 105651) and
    # -Wmissing-field-initializers on designated initializers that omit defaulted members.
    $<$<CXX_COMPILER_ID:GNU>:-Wno-restrict> -Wno-missing-field-initializers)
if(BRAID_WERROR)
  list(APPEND BRAID_WARNING_FLAGS -Werror)
endif()

set(BRAID_SANITIZE_FLAGS "")
if(BRAID_SANITIZE)
  set(BRAID_SANITIZE_FLAGS -fsanitize=${BRAID_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
endif()

function(braid_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${BRAID_WARNING_FLAGS}>
    $<$<COMPILE_LANGUAGE:CXX,C>:${BRAID_SANITIZE_FLAGS}>)
  if(BRAID_SANITIZE)
    target_link_options(${target} PRIVATE ${BRAID_SANITIZE_FLAGS})
  endif()
endfunction()
