# kprof::warnings: an INTERFACE target every kprof target links privately. Third-party headers
# come in as system includes, so -Werror only ever judges the project's own code.
add_library(kprof_warnings INTERFACE)
add_library(kprof::warnings ALIAS kprof_warnings)

target_compile_options(kprof_warnings INTERFACE
  -Wall -Wextra -Wshadow -Wimplicit-fallthrough
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual>)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  target_compile_options(kprof_warnings INTERFACE -Wthread-safety)
endif()
if(KPROF_WERROR)
  target_compile_options(kprof_warnings INTERFACE -Werror)
endif()
