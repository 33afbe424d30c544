# FINGRAV_SANITIZER selects one sanitizer build for the whole tree:
#   thread  - ThreadSanitizer (ring, sampler, event log races)
#   address - AddressSanitizer + UndefinedBehaviorSanitizer
# TSan and ASan cannot be combined, hence one option with two values.
set(FINGRAV_SANITIZER "" CACHE STRING "Sanitizer build: '', 'thread' or 'address'")
set_property(CACHE FINGRAV_SANITIZER PROPERTY STRINGS "" thread address)

if(FINGRAV_SANITIZER STREQUAL "thread")
  set(_fingrav_san_flags -fsanitize=thread)
elseif(FINGRAV_SANITIZER STREQUAL "address")
  set(_fingrav_san_flags -fsanitize=address,undefined -fno-sanitize-recover=undefined)
elseif(NOT FINGRAV_SANITIZER STREQUAL "")
  message(FATAL_ERROR "FINGRAV_SANITIZER='${FINGRAV_SANITIZER}': expected '', 'thread' or 'address'")
endif()

if(_fingrav_san_flags)
  if(FINGRAV_BUILD_PYTHON)
    message(FATAL_ERROR "FINGRAV_SANITIZER is for the C++ tests; configure with -DFINGRAV_BUILD_PYTHON=OFF")
  endif()
  # Applied globally on purpose: every object in a sanitizer build must be
  # instrumented, or TSan reports false races through uninstrumented code.
  add_compile_options(${_fingrav_san_flags} -fno-omit-frame-pointer -g)
  add_link_options(${_fingrav_san_flags})
endif()
