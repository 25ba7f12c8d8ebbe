"""The folder store: an archive in a local folder, written create-only (a temp file
hard-linked to its final name) and made durable with one sync per folder."""

import itertools
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from functools import cache
from pathlib import Path

from storage.archive.layout import TEMP_PREFIX, check_path
from storage.archive.stores import CHUNK, LocalPath, ObjectMissing, ObjectStore, StorageError, StoredObject


@cache  # looked up when a store first writes: ctypes stays off the start-up of commands that only read
def syncfs() -> Callable[[int], None] | None:
    """Linux's syncfs(2): every write to one filesystem made durable in one call (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    call = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
    if call is None:
        return None

    def sync_filesystem(fd: int) -> None:
        if call(fd) != 0:
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number))

    return sync_filesystem


def _sync(uri: str, path: str, sync: Callable[[int], None]) -> None:
    """``sync`` (fsync, or syncfs) on the file or folder at ``path``."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            sync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise StorageError(f"{uri}: cannot sync {path}: {exc.strerror or exc}") from exc


class LocalStore(ObjectStore):
    """A folder. Writes go to a temp file in the target folder, then are hard-linked
    to the final name, which fails rather than replace an object. They are made
    durable by ``flush``, before a manifest names them: one ``syncfs`` of the
    archive's filesystem on Linux, else an fsync of each file and folder written.

    A write is a handful of system calls, each of which gives up the GIL and takes it
    back from the crawl's thread: two upload threads keep up with a crawl, where four
    (or an fsync per file, which holds a thread and its queued bytes) cost the crawl
    a fifth of its speed (bench/RESULTS.md, "Second round: WARC off Scrapy's thread").
    A crawl's verifier processes store the bundles they verify here themselves, each with
    a store of its own over ``folder`` (``crawler.verifying.verify_worker``), and the
    writer ``adopt``s what they stored. What is still written in this process, a
    bundle-sized object, is written at once in the caller's thread: its few system calls
    cost less there than in a thread, each of whose calls waits for the GIL the crawl
    holds (bench/RESULTS.md, "Raw objects stored where they are verified")."""

    upload_threads = 2
    inline_write_max = 256 * 1024

    def __init__(self, root: LocalPath) -> None:
        self.root = Path(root).absolute()
        self.uri = self.root.as_uri()
        self.folder = str(self.root)
        self._unsynced_dirs: set[str] = set()
        self._unsynced_files: list[str] = []  # where the filesystem cannot be synced whole
        self._made: set[str] = set()  # folders known to exist
        self._names = itertools.count()
        self._lock = threading.Lock()

    def _target(self, path: str) -> Path:
        return self.root / check_path(path)

    def _create_bytes(self, path: str, data: bytes, sha256: str) -> bool:
        def write(fd: int) -> None:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]

        return self._create(path, write)

    def _create_file(self, path: str, local_path: LocalPath, sha256: str) -> bool:
        def copy(fd: int) -> None:
            with open(local_path, "rb") as source, open(fd, "wb", closefd=False) as out:
                shutil.copyfileobj(source, out, CHUNK)

        return self._create(path, copy)

    def _create(self, path: str, write: Callable[[int], None]) -> bool:
        target = f"{self.root}/{check_path(path)}"
        folder = target.rpartition("/")[0]
        try:
            if folder not in self._made:
                self._make(folder)
            fd, temp = self._temp(folder)
            try:
                try:
                    os.fchmod(fd, 0o644)
                    write(fd)
                finally:
                    os.close(fd)
                os.link(temp, target)
            except FileExistsError:
                return False
            finally:
                os.unlink(temp)
        except OSError as exc:
            raise StorageError(f"{self.uri}: cannot write {path}: {exc}") from exc
        self._written(target)
        return True

    def adopt(self, path: str) -> None:
        target = f"{self.root}/{check_path(path)}"
        folder = target.rpartition("/")[0]
        self._note_made(folder)  # the folders the other process made go to the flush too
        self._written(target)

    def _written(self, target: str) -> None:
        """A new object at ``target``: its folder's entry, and itself where the
        filesystem cannot be synced whole, go to the next flush."""
        with self._lock:
            self._unsynced_dirs.add(target.rpartition("/")[0])
            if syncfs() is None:
                self._unsynced_files.append(target)

    def _temp(self, folder: str) -> tuple[int, str]:
        while True:
            temp = f"{folder}/{TEMP_PREFIX}{os.getpid()}-{next(self._names)}"
            try:
                return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), temp
            except FileExistsError:  # a killed job's leftover, of a process with the same id
                continue

    def _make(self, folder: str) -> None:
        """Create ``folder`` and its parents; each goes to the next flush (a new entry in its parent)."""
        os.makedirs(folder, exist_ok=True)
        self._note_made(folder)

    def _note_made(self, folder: str) -> None:
        root = str(self.root)
        with self._lock:
            while folder not in self._made and len(folder) > len(root):
                self._made.add(folder)
                folder = folder.rpartition("/")[0]
                self._unsynced_dirs.add(folder)

    def read_chunks(self, path: str, chunk_size: int = CHUNK) -> Iterator[bytes]:
        try:
            with open(self._target(path), "rb") as handle:
                while chunk := handle.read(chunk_size):
                    yield chunk
        except FileNotFoundError:
            raise ObjectMissing(f"{self.uri}: no object {path}") from None
        except OSError as exc:
            raise StorageError(f"{self.uri}: cannot read {path}: {exc}") from exc

    def list(self, prefix: str = "") -> Iterator[StoredObject]:
        top = self.root / prefix.rpartition("/")[0] if prefix else self.root
        for folder, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                full = Path(folder, name)
                path = full.relative_to(self.root).as_posix()
                if not path.startswith(prefix):
                    continue
                try:
                    stat = full.stat()
                except FileNotFoundError:  # a temp file a concurrent write just removed
                    continue
                yield StoredObject(path, stat.st_size, datetime.fromtimestamp(stat.st_mtime, timezone.utc))

    def replace_bytes(self, path: str, data: bytes) -> None:
        target = f"{self.root}/{check_path(path)}"
        folder = target.rpartition("/")[0]
        try:
            self._make(folder)
            fd, temp = self._temp(folder)
            try:
                with open(fd, "wb") as handle:
                    os.fchmod(fd, 0o644)
                    handle.write(data)
                    handle.flush()
                    os.fsync(fd)
                os.replace(temp, target)
            finally:
                if os.path.exists(temp):
                    os.unlink(temp)
            _sync(self.uri, folder, os.fsync)
        except OSError as exc:
            raise StorageError(f"{self.uri}: cannot write {path}: {exc}") from exc

    def delete(self, path: str) -> None:
        try:
            self._target(path).unlink(missing_ok=True)
        except OSError as exc:
            raise StorageError(f"{self.uri}: cannot delete {path}: {exc}") from exc

    @property
    def unsynced_folders(self) -> frozenset[str]:
        """The folders whose new entries the next ``flush`` makes durable."""
        with self._lock:
            return frozenset(self._unsynced_dirs)

    def flush(self) -> None:
        with self._lock:
            folders, self._unsynced_dirs = self._unsynced_dirs, set()
            files, self._unsynced_files = self._unsynced_files, []
        whole = syncfs()
        if whole is not None:
            if folders:  # anything written since the last flush
                _sync(self.uri, str(self.root), whole)
            return
        for path in [*files, *sorted(folders, key=lambda d: d.count("/"), reverse=True)]:
            _sync(self.uri, path, os.fsync)

    def probe(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise StorageError(f"{self.root} is not a folder")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=self.root)
            os.close(fd)
            os.unlink(temp)
        except OSError as exc:
            raise StorageError(f"{self.root} is not a writable folder: {exc.strerror or exc}") from None
