"""Shared by the PyTorch peers: the torch module when a CUDA device is usable, else None (after
saying why), CUDA-event timing and CUDA-graph capture."""


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


def timed_ms(torch, fn, reps, windows=3):
    """Mean milliseconds of fn() over `reps` back-to-back calls, timed with CUDA events: the best
    of `windows` windows, after one warm-up call (library setup, first-call allocations)."""
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(windows):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end) / reps)
    return best


def captured(torch, fn):
    """fn() captured as one CUDA graph (after two warm-up runs on a side stream, as PyTorch's
    capture requires); returns the graph, whose replay() reruns every kernel without Python."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph
