"""A commit another writer made after a transaction's snapshot, as the conflict checker sees it
(reference ``WinningCommitSummary``): its actions, operation, timestamps and what it touched.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass

from deltalog import errors
from deltalog.actions import Action, CommitInfo, action_from_json
from deltalog.log.filenames import LOG_DIR, commit_name
from deltalog.txn.read_set import CommitActions

# commitInfo tag of a metadata update that only moves identity-column high-water marks.
IDENTITY_ONLY_UPDATE_TAG = "delta.identity.schemaUpdate"


@dataclass(frozen=True, slots=True)
class WinningCommit(CommitActions):
    """A commit another writer made after this transaction's snapshot (reference
    ``WinningCommitSummary``).

    Attributes:
        version: the commit's version.
        actions: its actions in file order, ``commitInfo`` included.
        modification_time: the commit file's modification time (ms): its timestamp when the
            commit carries no in-commit timestamp.
        table: the table root, for messages.
    """

    version: int
    actions: tuple[Action, ...]
    modification_time: int
    table: str = ""

    @classmethod
    def parse(cls, version: int, data: bytes, modification_time: int, table: str) -> WinningCommit:
        """The winning commit from the bytes of its commit file.

        Raises:
            InvalidTableError: a line is not a valid action (``DELTA_CORRUPT_COMMIT``).
        """
        file = posixpath.join(table, LOG_DIR, commit_name(version))
        actions: list[Action] = []
        for lineno, line in enumerate(data.split(b"\n"), start=1):
            if not line.strip():
                continue
            try:
                action = action_from_json(line.decode("utf-8"))
            except (ValueError, TypeError) as e:  # JSON, UTF-8 and missing-field errors
                raise errors.corrupt_commit(table, file, lineno, str(e)) from None
            if action is not None:
                actions.append(action)
        return cls(version, tuple(actions), modification_time, table)

    @property
    def commit_info(self) -> CommitInfo | None:
        return next((a for a in self.actions if isinstance(a, CommitInfo)), None)

    @property
    def operation(self) -> str:
        """The winner's operation name (``TRANSACTION`` without a commitInfo, as the
        reference says)."""
        info = self.commit_info
        if info is None:
            return "TRANSACTION"
        return info.operation or "UNKNOWN"

    @property
    def in_commit_timestamp(self) -> int | None:
        info = self.commit_info
        return info.in_commit_timestamp if info is not None else None

    @property
    def timestamp(self) -> int:
        """The in-commit timestamp when present, else the file's modification time."""
        ict = self.in_commit_timestamp
        return ict if ict is not None else self.modification_time

    @property
    def app_ids(self) -> frozenset[str]:
        return frozenset(t.app_id for t in self.set_transactions)

    @property
    def is_blind_append(self) -> bool:
        """``commitInfo.isBlindAppend``; absent means the commit may have changed data."""
        info = self.commit_info
        return bool(info is not None and info.is_blind_append)

    @property
    def identity_only_metadata_update(self) -> bool:
        """The metadata update only moves identity high-water marks (a commitInfo tag)."""
        info = self.commit_info
        tags = info.extra.get("tags") if info is not None else None
        return isinstance(tags, dict) and str(tags.get(IDENTITY_ONLY_UPDATE_TAG)).lower() == "true"

    @property
    def commit_info_json(self) -> str | None:
        info = self.commit_info
        if info is None:
            return None
        return json.dumps(info.to_dict(), separators=(",", ":"), default=str)
