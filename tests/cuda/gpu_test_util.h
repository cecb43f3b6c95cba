// Skips a GPU test cleanly when this machine has no usable CUDA device, saying why.
#pragma once

#include <gtest/gtest.h>

#include "cuda/device.h"

#define RLT_REQUIRE_CUDA_DEVICE()                                                          \
  do {                                                                                     \
    const ::rlt::cuda::DeviceList devices_ = ::rlt::cuda::list_devices();                  \
    if (devices_.devices.empty()) GTEST_SKIP() << "no CUDA device: " << devices_.why_none; \
  } while (0)
