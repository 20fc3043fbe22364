"""``GENERATE symlink_format_manifest`` (reference ``DeltaGenerateCommand``): writes the
symlink-format manifests of :mod:`deltalog.write.manifests` for a table's latest version. Pure
core.
"""

from __future__ import annotations

from deltalog.delta_log import DeltaLog
from deltalog.errors import manage as manage_errors
from deltalog.storage.base import LogStore
from deltalog.write.manifests import SYMLINK_MODE, write_manifests


def generate(path: str, mode: str = SYMLINK_MODE, *, store: LogStore | None = None) -> int:
    """``GENERATE symlink_format_manifest`` for the latest version of the table at ``path``;
    returns the number of manifest files written.

    Raises:
        InvalidArgumentError: ``DELTA_MODE_NOT_SUPPORTED`` for another mode.
        UnsupportedFeatureError: ``DELTA_UNSUPPORTED_GENERATE_WITH_DELETION_VECTORS``,
            ``DELTA_UNSUPPORTED_MANIFEST_GENERATION_WITH_COLUMN_MAPPING``.
    """
    delta_log = DeltaLog.for_table(path, store=store)
    snapshot = delta_log.update()
    if mode.strip().lower() != SYMLINK_MODE:
        raise manage_errors.unsupported_generate_mode(snapshot.table_root, mode)
    return write_manifests(delta_log.store, snapshot)
