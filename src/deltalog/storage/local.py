"""Local file system storage.

``write_if_absent`` writes a hidden temp file beside the target, fsyncs it, then ``os.link``s it
into place: link fails with ``FileExistsError`` when the name is taken, and the linked file is
complete, so a reader never sees a partial commit (``os.rename`` would silently overwrite).
``overwrite`` is the same temp file, ``os.replace``d over the target.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from typing import BinaryIO

from deltalog.storage.base import FileInfo


class LocalLogStore:
    """:class:`~deltalog.storage.base.LogStore` over the local file system."""

    def list_from(self, directory: str, start_name: str) -> list[FileInfo]:
        out: list[FileInfo] = []
        with os.scandir(directory) as it:
            for entry in it:
                name = entry.name
                if name.startswith(".") or name < start_name:
                    continue
                try:
                    if not entry.is_file():
                        continue
                    st = entry.stat()
                except FileNotFoundError:  # deleted while listing
                    continue
                out.append(FileInfo(entry.path, st.st_size, st.st_mtime_ns // 1_000_000))
        out.sort(key=lambda f: f.name)
        return out

    def list_recursive(self, directory: str) -> Iterator[FileInfo]:
        for root, _dirs, names in os.walk(directory):
            for name in names:
                path = os.path.join(root, name)
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    continue
                yield FileInfo(path, st.st_size, st.st_mtime_ns // 1_000_000)

    def list_children(self, directory: str) -> tuple[list[FileInfo], list[str]]:
        files: list[FileInfo] = []
        directories: list[str] = []
        try:
            with os.scandir(directory) as it:
                for entry in it:
                    try:
                        if entry.is_dir():
                            directories.append(entry.name)
                        elif entry.is_file():
                            st = entry.stat()
                            files.append(
                                FileInfo(entry.path, st.st_size, st.st_mtime_ns // 1_000_000)
                            )
                    except FileNotFoundError:  # deleted while listing
                        continue
        except FileNotFoundError:
            pass
        return files, directories

    def read(self, path: str) -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def stat(self, path: str) -> FileInfo:
        st = os.stat(path)
        return FileInfo(path, st.st_size, st.st_mtime_ns // 1_000_000)

    def write_if_absent(self, path: str, data: bytes) -> None:
        tmp = _write_temp(path, data)
        try:
            os.link(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)

    def overwrite(self, path: str, data: bytes, *, durable: bool = True) -> None:
        tmp = _write_temp(path, data, sync=durable)
        try:
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    @contextlib.contextmanager
    def open_output(self, path: str) -> Iterator[BinaryIO]:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            with open(path, "xb") as f:
                yield f
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            raise

    def rename(self, source: str, target: str) -> None:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.link(source, target)  # fails with FileExistsError instead of replacing
        os.unlink(source)

    def delete_directory(self, directory: str) -> None:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)

    def delete(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)


def _write_temp(path: str, data: bytes, *, sync: bool = True) -> str:
    """``data`` in a hidden temp file beside ``path`` (folders made as needed), fsynced when
    ``sync``."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    return tmp
