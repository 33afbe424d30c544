# Warnings per target, never global, so third-party code (pybind11) is not held
# to our flags.
function(fingrav_set_warnings target)
  if(MSVC)
    target_compile_options(${target} PRIVATE /W4)
  else()
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow
      -Wconversion -Wno-sign-conversion -Wnon-virtual-dtor -Wold-style-cast
      -Woverloaded-virtual)
    if(FINGRAV_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()
option(FINGRAV_WERROR "Treat warnings in project targets as errors" OFF)
