"""What a stopped ``fl poc`` run leaves: the benchmarks' one check."""

from __future__ import annotations

from pathlib import Path

from monai_forget.fl.poc import DeploymentError, check_ports_free
from monai_forget.processes import processes_mentioning


def leftovers(out: Path) -> tuple[int, bool]:
    """(processes still mentioning the run's workspace, a POC port still taken)."""
    try:
        check_ports_free()
        taken = False
    except DeploymentError:
        taken = True
    return len(processes_mentioning(str(out.resolve()))), taken
