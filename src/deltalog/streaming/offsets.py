"""The Delta source's offset (reference ``DeltaSourceOffset``): where in the table a stream is.

An offset names a table version and a position inside it; everything up to and including that
position has been read:

* ``is_starting_version=True``: the stream is reading the snapshot at ``reservoir_version``;
  ``index`` is the position of the last file read in the snapshot's file order
  (modification time, then path), ``-1`` before the first.
* ``is_starting_version=False``: the stream reads commits; ``index`` is the position of the last
  action read in the commit file of ``reservoir_version`` (its replay rows, in file order),
  ``-1`` when none of that version has been read yet.

Once a version (or the whole snapshot) has been read the offset moves to the start of the next
version, ``(v + 1, -1, False)``, so equal offsets mean "no new data" and a restarted query
resumes exactly where its checkpointed offset says. Offsets travel as JSON dicts with the
reference's field names, plus ``reservoirId`` (the table id) so that a checkpoint reused on a
re-created table is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deltalog import errors

SOURCE_VERSION = 1
BASE_INDEX = -1


@dataclass(frozen=True, slots=True, order=True)
class DeltaSourceOffset:
    """A position in a Delta table's stream of files (see the module docstring)."""

    reservoir_version: int
    index: int
    is_starting_version: bool
    reservoir_id: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "sourceVersion": SOURCE_VERSION,
            "reservoirId": self.reservoir_id,
            "reservoirVersion": self.reservoir_version,
            "index": self.index,
            "isStartingVersion": self.is_starting_version,
        }

    @classmethod
    def from_json(cls, value: Mapping[str, Any], *, table_id: str, table: str) -> DeltaSourceOffset:
        """Parse a checkpointed offset of the table with id ``table_id``.

        Raises:
            InvalidTableError: the offset was written by a newer format
                (DELTA_INVALID_FORMAT_FROM_SOURCE_VERSION), or for another table
                (DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE).
        """
        version = int(value.get("sourceVersion", SOURCE_VERSION))
        if version > SOURCE_VERSION:
            raise errors.InvalidTableError(
                "DELTA_INVALID_FORMAT_FROM_SOURCE_VERSION",
                f"Unsupported format. Expected version should be smaller than or equal to "
                f"{SOURCE_VERSION} but was {version}. Please upgrade to newer version of Delta.",
                table=table,
            )
        reservoir_id = str(value.get("reservoirId", table_id))
        if reservoir_id != table_id:
            raise errors.InvalidTableError(
                "DIFFERENT_DELTA_TABLE_READ_BY_STREAMING_SOURCE",
                f"The streaming query was reading from an unexpected Delta table (id = "
                f"'{table_id}'). It used to read from another Delta table (id = "
                f"'{reservoir_id}') according to checkpoint.",
                table=table,
                help="revert the change of table, or delete the query's checkpoint to restart "
                "from scratch.",
            )
        return cls(
            int(value["reservoirVersion"]),
            int(value["index"]),
            bool(value["isStartingVersion"]),
            reservoir_id,
        )

    def next_version(self) -> DeltaSourceOffset:
        """The start of the version after this one (this version read to its end)."""
        return DeltaSourceOffset(self.reservoir_version + 1, BASE_INDEX, False, self.reservoir_id)
