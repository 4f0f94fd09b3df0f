"""The machine a reproduction ran on (stated in REPORT.md beside every wall time)."""

from __future__ import annotations

import os
import platform


def machine_info() -> dict:
    """CPU model and count, load average, torch threads, versions."""
    import torch

    from hf_attn.core.environment import environment_versions

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {"cpu": cpu, "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "platform": platform.platform(), "load_average_1_5_15": [round(x, 2) for x in load],
            "versions": environment_versions()}
