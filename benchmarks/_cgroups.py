"""CPU cgroups for benchmarks: each replica in a group of its own, limited to a share of a CPU.

Works with cgroup v1 (a writable ``cpu`` controller: ``cpu.cfs_quota_us`` /
``cpu.cfs_period_us``) or v2 (``cpu.max``), as root; :class:`NoCgroups` says why when neither
can be used. A process joins its group before it execs (``preexec_fn``), so nothing it does
runs outside the limit.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CPU_PERIOD_US", "CPU_QUOTA_US", "CpuCgroups", "NoCgroups", "cgroup_of", "enter"]

CPU_QUOTA_US = 25_000
CPU_PERIOD_US = 100_000
"""Each child group: 25 ms of CPU time every 100 ms, a quarter of one CPU."""


class NoCgroups(Exception):
    """Why the replicas cannot be put in CPU-limited cgroups here."""


@dataclass
class CpuCgroups:
    """A parent cgroup of this benchmark's, with one 0.25-CPU child per replica slot."""

    version: int
    parent: Path
    children: list[Path]

    @classmethod
    def create(cls, slots: int) -> CpuCgroups:
        if os.geteuid() != 0:
            raise NoCgroups("not root: cgroups can only be created as root")
        version, root = _cpu_controller()
        parent = root / f"workload-scaleout-{os.getpid()}"
        try:
            parent.mkdir()
        except OSError as exc:
            raise NoCgroups(f"cannot create a cgroup under {root}: {exc}") from exc
        made = cls(version, parent, [])
        try:
            if version == 2:
                _write(parent / "cgroup.subtree_control", "+cpu")
            for slot in range(slots):
                child = parent / f"r{slot}"
                child.mkdir()
                made.children.append(child)
                if version == 1:
                    _write(child / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                    _write(child / "cpu.cfs_quota_us", str(CPU_QUOTA_US))
                else:
                    _write(child / "cpu.max", f"{CPU_QUOTA_US} {CPU_PERIOD_US}")
        except OSError as exc:
            made.remove()
            raise NoCgroups(f"cannot set a CPU limit in {parent}: {exc}") from exc
        return made

    def remove(self) -> list[str]:
        """Remove the cgroups (empty by now); what could not be removed, and why."""
        errors = []
        for path in [*reversed(self.children), self.parent]:
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError as exc:
                errors.append(f"{path}: {exc}")
        return errors

    def describe(self) -> dict[str, Any]:
        limit = (
            f"cpu.cfs_quota_us {CPU_QUOTA_US} / cpu.cfs_period_us {CPU_PERIOD_US}"
            if self.version == 1
            else f'cpu.max "{CPU_QUOTA_US} {CPU_PERIOD_US}"'
        )
        return {"version": self.version, "parent": str(self.parent), "limit": limit}

    def throttling(self, child: Path) -> dict[str, float]:
        """The child's ``cpu.stat``: periods, throttled periods, seconds throttled (v2: used)."""
        stat: dict[str, float] = {}
        with contextlib.suppress(OSError):
            for line in (child / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                stat[key] = float(value)
        throttled_s = (
            stat.get("throttled_time", 0) / 1e9
            if self.version == 1
            else stat.get("throttled_usec", 0) / 1e6
        )
        result = {
            "periods": stat.get("nr_periods", 0),
            "throttled_periods": stat.get("nr_throttled", 0),
            "throttled_s": throttled_s,
        }
        if "usage_usec" in stat:
            result["usage_s"] = stat["usage_usec"] / 1e6
        return result


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _cpu_controller() -> tuple[int, Path]:
    """The writable ``cpu`` controller's mount: cgroup v1's, else cgroup v2's."""
    v2: Path | None = None
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mount, kind, options = Path(fields[1]), fields[2], fields[3].split(",")
        if kind == "cgroup" and "cpu" in options and (mount / "cpu.cfs_quota_us").exists():
            if not os.access(mount, os.W_OK):
                raise NoCgroups(f"the cgroup v1 cpu controller at {mount} is not writable")
            return 1, mount
        if kind == "cgroup2":
            with contextlib.suppress(OSError):
                if "cpu" in (mount / "cgroup.controllers").read_text().split():
                    v2 = mount
    if v2 is None:
        raise NoCgroups("no cgroup v1 cpu controller and no cgroup v2 with cpu is mounted")
    if not os.access(v2, os.W_OK):
        raise NoCgroups(f"the cgroup v2 hierarchy at {v2} is not writable")
    return 2, v2


def enter(cgroup: Path) -> Callable[[], None]:
    """A ``preexec_fn``: the child writes its own pid to the cgroup before it execs."""
    procs = str(cgroup / "cgroup.procs")

    def enter() -> None:
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, str(os.getpid()).encode())
        finally:
            os.close(fd)

    return enter


def cgroup_of(pid: int) -> str:
    """The cgroup lines of ``pid`` (``/proc/<pid>/cgroup``)."""
    return Path(f"/proc/{pid}/cgroup").read_text()
