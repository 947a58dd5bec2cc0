"""Thread policy, set once per process: intra-op threads = physical cores / concurrent jobs, inter-op 1.

Oversubscription (jobs × threads > cores) makes every job slower than running them one after another, so the
product of the two never exceeds the core count. Denormals are flushed: the generators' late layers produce
tiny activations whose denormal arithmetic is many times slower on x86.
"""

from __future__ import annotations

import os
import threading

import torch

_lock = threading.Lock()
_configured: int | None = None
_jobs = 1


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
        _configured = n
        return n


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
