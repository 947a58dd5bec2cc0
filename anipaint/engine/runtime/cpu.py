"""What this CPU can do: the instruction-set flags that change which kernels a build or a layer picks.

Cached builds are keyed by them (a different CPU rebuilds), and the strip executor picks bf16 convolutions where
the CPU multiplies bf16 natively.
"""

from __future__ import annotations

_CPU_FLAGS = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx_vnni",
              "amx_tile", "amx_bf16", "amx_int8")


def cpu_flags() -> tuple[str, ...]:
    """The instruction-set flags that change which kernels a build picks."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    present = set(line.split(":", 1)[1].split())
                    return tuple(f for f in _CPU_FLAGS if f in present)
    except OSError:
        pass
    return ()


def has_native_bf16() -> bool:
    return bool({"avx512_bf16", "amx_bf16"} & set(cpu_flags()))
