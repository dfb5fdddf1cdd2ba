/* attention/sim/include/cublas_v2.h -- the simulator build's stand-in for CUDA's
 * cublas_v2.h: everything is in attention/sim/cudasim.h. */
#ifndef RKVSIM_CUBLAS_V2_H
#define RKVSIM_CUBLAS_V2_H
#include "attention/sim/cudasim.h"
#endif
