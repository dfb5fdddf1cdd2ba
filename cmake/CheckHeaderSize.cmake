# cmake -DDIR=<include dir> -DMAX=<lines> -P CheckHeaderSize.cmake
# Fails when a public header is longer than MAX lines: the API is split into
# one header per module so that a reader finds a module's whole contract in
# one file of readable length.
cmake_minimum_required(VERSION 3.16)
file(GLOB_RECURSE headers "${DIR}/*.h")
list(LENGTH headers count)
if(count LESS 5)
  message(FATAL_ERROR "only ${count} headers under ${DIR}: the glob is broken")
endif()
set(failed "")
foreach(h IN LISTS headers)
  file(READ "${h}" text)
  string(REGEX REPLACE "[^\n]" "" newlines "${text}")
  string(LENGTH "${newlines}" n)
  if(n GREATER MAX)
    string(APPEND failed "  ${h}: ${n} lines\n")
  endif()
endforeach()
if(failed)
  message(FATAL_ERROR "public headers over ${MAX} lines:\n${failed}")
endif()
message(STATUS "${count} public headers, none over ${MAX} lines")
