"""The SDK's build hook: derive the blocking modules from their async sources (ADR 0035).

Runs on every build hatchling makes of this project: the wheel, the editable wheel ``uv sync``
installs, and the sdist. It writes the derived modules into ``src/workload_sdk`` (where the
editable install finds them) and names them artifacts, since the VCS ignores them and hatchling
leaves VCS-ignored files out of what it builds by default.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


def _sync_twins() -> Any:
    # Loaded by its path: a build backend's sys.path need not hold the project's folder.
    path = Path(__file__).resolve().with_name("sync_twins.py")
    spec = importlib.util.spec_from_file_location("_workload_sdk_sync_twins", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class SyncTwinsHook(BuildHookInterface):  # type: ignore[type-arg]
    """Writes the derived modules and adds them to the build."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Write the derived modules (only those that changed) and name them artifacts."""
        root = Path(self.root)
        for path in _sync_twins().write(root):
            build_data["artifacts"].append(path.relative_to(root).as_posix())
