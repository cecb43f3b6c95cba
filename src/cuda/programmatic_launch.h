// Which streams launch rlt's kernels with programmatic dependent launch (PDL, sm_90+): a kernel
// may then begin launching while the kernel before it on the stream is still finishing, and waits
// for that kernel's results inside (cuda/launch.cuh), which hides most of the gap between two
// short kernels. Off unless a stream's owner turns it on. No CUDA header here.
#pragma once

struct CUstream_st;

namespace rlt::cuda {

void set_programmatic_launch(CUstream_st* stream, bool enabled);
bool programmatic_launch_enabled(CUstream_st* stream);

}  // namespace rlt::cuda
