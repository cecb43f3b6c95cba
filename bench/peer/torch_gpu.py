"""Shared by the PyTorch peers: the torch module when a CUDA device is usable, else None (after
saying why), plus CUDA-event timing."""


def cuda_torch():
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed: nothing to compare")
        return None
    if not torch.cuda.is_available():
        print("PyTorch sees no CUDA device: nothing to compare")
        return None
    return torch


def timed_ms(torch, fn, reps):
    """Mean milliseconds of fn() over `reps` back-to-back calls, timed with CUDA events."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / reps
