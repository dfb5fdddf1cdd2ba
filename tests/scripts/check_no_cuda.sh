#!/bin/sh
# tests/scripts/check_no_cuda.sh LIBRARY -- the core library must load on a machine
# without the CUDA runtime: ldd (every library it pulls in, transitively)
# must name no CUDA library (cudart, cuBLAS, cuBLASLt, the driver ...).
set -eu
lib=$1
out=$(ldd "$lib")
if printf '%s\n' "$out" | grep -i -E 'lib(cuda|cudart|cublas|cufft|curand|cusolver|cusparse|cudnn|nvrtc|nvidia|nvjitlink)|/cuda' ; then
    echo "check_no_cuda: $lib depends on the CUDA libraries above"
    exit 1
fi
echo "check_no_cuda: $lib needs no CUDA library:"
printf '%s\n' "$out"
