"""How a checkpoint is laid out (:class:`CheckpointOptions`): a value shared by the snapshot (which
hands it to its engine's sidecar writer) and :mod:`deltalog.log.checkpoint_writer`, below both.
"""

from __future__ import annotations

from dataclasses import dataclass

from deltalog import errors


@dataclass(frozen=True, slots=True)
class CheckpointOptions:
    """How to lay a checkpoint out (the reference's session settings).

    Attributes:
        part_size: the most actions per part of a classic checkpoint; more → multi-part
            (``spark.databricks.delta.checkpoint.partSize``). ``None``: one file.
        sidecar_actions: the most file actions per V2 sidecar.
        v2_top_level_format: ``parquet`` or ``json``, the V2 top-level file's format
            (``spark.databricks.delta.checkpointV2.topLevelFileFormat``).
    """

    part_size: int | None = None
    sidecar_actions: int = 50_000
    v2_top_level_format: str = "parquet"

    def __post_init__(self) -> None:
        if self.part_size is not None and self.part_size < 1:
            raise errors.invalid_argument(
                f"checkpoint part size must be positive: {self.part_size}"
            )
        if self.sidecar_actions < 1:
            raise errors.invalid_argument(
                f"actions per sidecar must be positive: {self.sidecar_actions}"
            )
        if self.v2_top_level_format not in ("parquet", "json"):
            raise errors.invalid_argument(
                "the V2 checkpoint top-level format must be 'parquet' or 'json', not "
                f"{self.v2_top_level_format!r}"
            )
