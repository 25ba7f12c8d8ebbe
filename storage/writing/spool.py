"""The local folder a run spools its table files in until they are stored: one per
process, named by the process id, so a later job can tell a killed job's folder (its
process is gone) from a live one's and remove it."""

import logging
import os
import shutil
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

SPOOL_PREFIX = "pith-spool-"  # then the writing process's id: a dead one's folder can go


def sweep_spools(spool_dir: str | Path | None = None) -> list[str]:
    """Remove the table spool folders that killed jobs left in ``spool_dir`` (default:
    the system's temp folder): those named by a process that no longer exists. A
    folder of a live process, or one not named by a process, stays."""
    removed = []
    for folder in Path(spool_dir or tempfile.gettempdir()).glob(f"{SPOOL_PREFIX}*-*"):
        pid = folder.name[len(SPOOL_PREFIX) :].partition("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid() or not folder.is_dir():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder.name)
        except PermissionError:
            pass  # alive, and someone else's
    if removed:
        logger.info("removed %d spool folders of killed jobs: %s", len(removed), ", ".join(removed))
    return removed


class Spool:
    """A run's spool folder under ``parent`` (default: the system's temp folder).
    Nothing exists on disk until ``open``, which first sweeps the folders of killed
    runs; ``cleanup`` removes it with whatever it still holds."""

    def __init__(self, parent: str | Path | None = None) -> None:
        self.parent = parent
        self._folder: tempfile.TemporaryDirectory | None = None

    def open(self) -> None:
        sweep_spools(self.parent)
        self._folder = tempfile.TemporaryDirectory(prefix=f"{SPOOL_PREFIX}{os.getpid()}-", dir=self.parent)

    @property
    def path(self) -> str:
        if self._folder is None:
            raise RuntimeError("the spool folder is made by open()")
        return self._folder.name

    def cleanup(self) -> None:
        if self._folder is not None:
            self._folder.cleanup()
