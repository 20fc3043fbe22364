"""``deltalog.write_table``: a batch write from plain Python (pyarrow), no Spark.

For small jobs, tests and tools. The same planning and commit as ``df.write.format("delta")``
(:mod:`deltalog.commands.write.write_into_delta`); the data files are written on this machine.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from deltalog import column_defaults, errors
from deltalog.commands.write.constraints import check_batch
from deltalog.commands.write.identity import IdentityColumn, columns_to_generate, identity_columns
from deltalog.commands.write.write_into_delta import (
    WriteOptions,
    commit_write,
    prepare_write,
)
from deltalog.delta_log import DeltaLog
from deltalog.schema import schema_from_arrow
from deltalog.write.char_varchar import fit_char_varchar
from deltalog.write.file_writer import DataFileWriter

SCHEMA_MODES = (None, "merge", "overwrite")


def write_table(
    path: str,
    data: pa.Table | pa.RecordBatchReader | pa.RecordBatch,
    *,
    mode: str = "error",
    partition_by: Sequence[str] | str | None = None,
    configuration: Mapping[str, str] | None = None,
    schema_mode: str | None = None,
    predicate: str | None = None,
    partition_overwrite_mode: str = "static",
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    user_metadata: str | None = None,
    max_records_per_file: int = 0,
    target_file_size: int = 128 * 1024 * 1024,
    data_change: bool = True,
    description: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> int | None:
    """Write Arrow data into the Delta table at ``path`` (created when absent).

    Args:
        mode: ``error`` (the default: fail if the table exists), ``append``, ``overwrite``,
            ``ignore`` (do nothing if the table exists).
        partition_by: partition columns of a new table (must match an existing table's).
        configuration: ``delta.*`` table properties of a new table.
        schema_mode: ``merge`` adds new columns (and widens column types on tables with
            ``delta.enableTypeWidening``); ``overwrite`` (with ``mode="overwrite"``)
            replaces the schema and partitioning.
        predicate: with ``mode="overwrite"``, replace only the rows matching this SQL
            condition (delta-spark's ``replaceWhere``); every written row must match it.
        partition_overwrite_mode: ``dynamic`` replaces only the partitions written.
        txn_app_id, txn_version: an idempotent write: skipped when the table already has this
            version (or a later one) for this application id.
        storage_options: credentials and endpoint of an object store (delta-rs's names,
            ``AWS_ENDPOINT_URL``, ...), used for the bucket in this process.

    Returns:
        The committed version, or ``None`` when nothing was committed.

    Raises:
        DeltaWriteError, InvalidArgumentError, UnsupportedFeatureError: the write cannot be done
            as asked; nothing was committed.
        DeltaConcurrentModificationException: a concurrent commit conflicts.
    """
    if schema_mode not in SCHEMA_MODES:
        raise errors.invalid_argument(
            f"schema_mode must be 'merge' or 'overwrite', not {schema_mode!r}", table=path
        )
    dynamic = _partition_overwrite_mode(partition_overwrite_mode, path) == "dynamic"
    options = WriteOptions(
        mode=mode,
        partition_by=(partition_by,)
        if isinstance(partition_by, str)
        else (tuple(partition_by) if partition_by is not None else None),
        replace_where=predicate,
        dynamic_partition_overwrite=dynamic,
        merge_schema=schema_mode == "merge",
        overwrite_schema=schema_mode == "overwrite",
        txn_app_id=txn_app_id,
        txn_version=txn_version,
        user_metadata=user_metadata,
        max_records_per_file=max_records_per_file,
        target_file_size=target_file_size,
        data_change=data_change,
        configuration=dict(configuration or {}),
        description=description,
    )
    log = DeltaLog.for_table(path, storage_options=storage_options)
    batches = _batches(data)
    plan = prepare_write(log, schema_from_arrow(batches.schema), options)
    if plan.skip:
        return None
    # Defaults are Spark SQL: data without a defaulted column cannot be written here.
    column_defaults.check_given(plan.layout.schema, batches.schema.names, log.table_root)
    identity = columns_to_generate(
        identity_columns(plan.layout.schema), batches.schema.names, log.table_root
    )
    next_values = {c.name: c.first_value for c in identity}
    with DataFileWriter(log.store, plan.layout, overlap_statistics=True) as writer:
        for batch in batches:
            batch = _fill_identity(batch, identity, next_values)
            batch = fit_char_varchar(batch, plan.layout.schema, log.table_root)
            check_batch(plan, batch)
            writer.add(batch)
        adds = writer.finish()
    marks = {
        c.name: next_values[c.name] - c.step
        for c in identity
        if next_values[c.name] != c.first_value
    }
    return commit_write(plan, adds, identity_marks=marks)


def _fill_identity(
    batch: pa.RecordBatch, columns: list[IdentityColumn], next_values: dict[str, int]
) -> pa.RecordBatch:
    """``batch`` with generated values for the identity columns it lacks."""
    for c in columns:
        first, n = next_values[c.name], batch.num_rows
        values = (
            pa.array(range(first, first + c.step * n, c.step), pa.int64())
            if n
            else pa.array([], pa.int64())
        )
        batch = batch.append_column(c.name, values)
        next_values[c.name] = first + c.step * n
    return batch


def _partition_overwrite_mode(value: str, table: str) -> str:
    mode = (value or "static").lower()
    if mode not in ("static", "dynamic"):
        raise errors.InvalidArgumentError(
            "DELTA_ILLEGAL_OPTION",
            f"Invalid value '{value}' for option 'partitionOverwriteMode': must be 'static' or "
            "'dynamic'.",
            table=table,
        )
    return mode


class _Batches:
    """The input as a stream of record batches with a known schema."""

    def __init__(self, schema: pa.Schema, source: Iterator[pa.RecordBatch]) -> None:
        self.schema = schema
        self._source = source

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        return self._source


def _batches(data: Any) -> _Batches:
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        return _Batches(data.schema, iter(data.to_batches()))
    if isinstance(data, pa.RecordBatchReader):
        return _Batches(data.schema, iter(data))
    raise errors.invalid_argument(
        f"data must be a pyarrow Table, RecordBatch or RecordBatchReader, not {type(data).__name__}"
    )
