"""Thread and allocator policy, set once per process: intra-op threads = physical cores / concurrent jobs,
inter-op 1; large blocks kept in the heap.

Oversubscription (jobs × threads > cores) makes every job slower than running them one after another, so the
product of the two never exceeds the core count. Denormals are flushed: the generators' late layers produce
tiny activations whose denormal arithmetic is many times slower on x86.

glibc serves every block over its mmap threshold (at most 32 MB by default) with a fresh ``mmap`` and unmaps it
on free, so each activation of a paint is new memory the kernel must fault in and zero: measured on v3-hayao's
eager graph at 512 px, 1.2-1.7 s of system time per picture, ~40 % of its wall time. Raising the mmap and trim
thresholds to 1 GiB keeps such blocks in the heap for the next layer and the next picture (system time
~0.05-0.4 s, the paint ~1.5x faster, peak RSS ~+200 MB); the strip executor still trims the heap after each
layer, so full-resolution paints stay bounded.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

import torch

_lock = threading.Lock()
_configured: int | None = None
_jobs = 1
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)
_HEAP_KEEPS = 1 << 30


def physical_cores() -> int:
    """Physical cores available to this process (hyper-threads don't add conv throughput)."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:
        available = os.cpu_count() or 1
    try:
        siblings: set[str] = set()
        for cpu in os.sched_getaffinity(0):
            path = f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
            with open(path) as fh:
                siblings.add(fh.read().strip())
        return max(1, min(available, len(siblings)))
    except (OSError, AttributeError):
        return max(1, available)


def threads_per_job(jobs: int, threads: int = 0) -> int:
    """Intra-op threads for one job; an explicit ``threads`` wins but is clipped so jobs × threads ≤ cores."""
    cores = physical_cores()
    per_job = max(1, cores // max(1, jobs))
    return max(1, min(threads, per_job)) if threads else per_job


def configure(jobs: int = 1, threads: int = 0) -> int:
    """Apply the policy once; later calls return the value already set (torch allows inter-op only once)."""
    global _configured, _jobs
    with _lock:
        if _configured is not None:
            return _configured
        _jobs = max(1, jobs)
        n = threads_per_job(jobs, threads)
        torch.set_num_threads(n)
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # already started parallel work; intra-op is what matters for convs
            pass
        torch.set_flush_denormal(True)
        keep_large_blocks()
        _configured = n
        return n


def keep_large_blocks() -> bool:
    """Raise glibc's mmap and trim thresholds (see the module's doc); False where the C library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _HEAP_KEEPS) and mallopt(_M_TRIM_THRESHOLD, _HEAP_KEEPS))


def current() -> int:
    """Intra-op threads per job under the policy (configures with the defaults if nobody has yet)."""
    return _configured if _configured is not None else configure()


def ort_options():
    """ONNX Runtime session options under the same policy: intra-op = this job's threads, inter-op 1,
    sequential execution, all graph optimisations, denormals as zero."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = current()
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.set_denormal_as_zero", "1")
    # Threads that spin after a kernel steal the core from the next job's threads; with jobs > 1 let them sleep.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if _jobs <= 1 else "0")
    return opts
