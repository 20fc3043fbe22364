"""``delta.dataSkippingStatsColumns`` and clustering columns, as delta-spark checks and keeps
them (``StatisticsCollection.validateDeltaStatsColumns``, ``dropDeltaStatsColumns``,
``renameDeltaStatsColumn``, ``ClusteredTableUtils.validateClusteringColumnsInStatsSchema``),
on real tables: a refused list commits nothing, and the statistics deltalake reads follow the
list after DROP and RENAME COLUMN.
"""

from __future__ import annotations

import json
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from deltalog import errors
from deltalog.commands.ddl.alter_columns import cluster_by, drop_columns, rename_column
from deltalog.commands.ddl.protocol_change import set_table_properties
from deltalog.commands.optimize.plan import clustering_columns
from deltalog.commands.write.write_table import write_table
from deltalog.delta_log import DeltaLog
from deltalog.skipping_columns import format_column_list, parse_column_list

KEY = "delta.dataSkippingStatsColumns"


def _rows(n: int = 3) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(n), pa.int64()),
            "flag": [i % 2 == 0 for i in range(n)],
            "s": [{"x": i, "b": bytes([i])} for i in range(n)],
            "name": [f"n{i}" for i in range(n)],
            "p": ["a"] * n,
        }
    )


def _table(tmp_path: Path, conf: dict[str, str] | None = None, partitioned: bool = True) -> str:
    root = str(tmp_path / "t")
    write_table(
        root,
        _rows(),
        partition_by=["p"] if partitioned else None,
        configuration={"delta.columnMapping.mode": "name", **(conf or {})},
    )
    return root


def _version(root: str) -> int:
    return deltalake.DeltaTable(root).version()


def _configuration(root: str) -> dict[str, str]:
    return dict(deltalake.DeltaTable(root).metadata().configuration)


def _last_stats(root: str) -> dict[str, object]:
    """The statistics of the newest file, keyed ``min.<logical path>`` and
    ``null_count.<logical path>``: deltalake flattens them by physical names, mapped back with
    the physical names of deltalake's schema."""
    table = deltalake.DeltaTable(root)
    logical: dict[str, str] = {}

    def walk(fields: list[dict[str, object]], lpath: str, ppath: str) -> None:
        for f in fields:
            meta = f.get("metadata") or {}
            phys = str(meta.get("delta.columnMapping.physicalName", f["name"]))  # type: ignore[union-attr]
            lp, pp = f"{lpath}{f['name']}", f"{ppath}{phys}"
            logical[pp] = lp
            t = f["type"]
            if isinstance(t, dict) and t.get("type") == "struct":
                walk(t["fields"], lp + ".", pp + ".")

    walk(json.loads(table.schema().to_json())["fields"], "", "")
    adds = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    newest = max(adds, key=lambda a: a["modification_time"])
    out: dict[str, object] = {}
    for key, value in newest.items():
        kind, _, path = key.partition(".")
        if kind in ("min", "null_count") and path in logical:
            out[f"{kind}.{logical[path]}"] = value
    return out


@pytest.mark.parametrize(
    ("listed", "error_class"),
    [
        ("id, p", "DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_PARTITIONED_COLUMN"),
        ("id, nope", "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"),
        ("s.nope", "DELTA_COLUMN_NOT_FOUND_IN_SCHEMA"),
        ("id, flag", "DELTA_COLUMN_DATA_SKIPPING_NOT_SUPPORTED_TYPE"),
        ("id, `id`", "DELTA_DUPLICATE_DATA_SKIPPING_COLUMNS"),
        ("s, s.x", "DELTA_DUPLICATE_DATA_SKIPPING_COLUMNS"),
    ],
)
def test_a_bad_list_is_refused_and_commits_nothing(
    tmp_path: Path, listed: str, error_class: str
) -> None:
    root = _table(tmp_path)
    before = _version(root)
    with pytest.raises(errors.InvalidArgumentError) as e:
        set_table_properties(root, {KEY: listed})
    assert e.value.error_class == error_class
    assert _version(root) == before
    assert KEY not in _configuration(root)


def test_structs_bring_their_leaves_and_nested_leaves_of_any_type_are_allowed(
    tmp_path: Path,
) -> None:
    root = _table(tmp_path)
    set_table_properties(root, {KEY: "`id`, s.b"})  # a binary leaf named inside a struct
    set_table_properties(root, {KEY: "s, name"})  # the struct's binary leaf comes along
    write_table(root, _rows(5), mode="append")
    stats = _last_stats(root)
    assert stats["min.s.x"] == 0 and stats["min.name"] == "n0"
    assert "min.id" not in stats and stats["null_count.s.b"] == 0


def test_drop_and_rename_keep_the_list_in_step(tmp_path: Path) -> None:
    root = _table(tmp_path, {KEY: "id, s.x, name"})
    drop_columns(root, [["s"]])
    assert parse_column_list(_configuration(root)[KEY]) == [("id",), ("name",)]
    rename_column(root, ["name"], "label")
    assert parse_column_list(_configuration(root)[KEY]) == [("id",), ("label",)]
    write_table(
        root,
        _rows(4).drop_columns(["s"]).rename_columns(["id", "flag", "label", "p"]),
        mode="append",
    )
    stats = _last_stats(root)
    assert stats["min.label"] == "n0" and stats["min.id"] == 0
    assert not any(k.endswith(".flag") and k.startswith("min.") for k in stats)


def test_column_lists_round_trip_through_their_quoting() -> None:
    columns = [("a",), ("b c", "d"), ("x.y", "z"), ("`q`",), ("1",)]
    text = format_column_list(columns)
    assert text == "a,`b c`.d,`x.y`.z,```q```,`1`"
    assert parse_column_list(text) == columns


def test_clustering_columns_need_min_max_statistics(tmp_path: Path) -> None:
    root = _table(tmp_path, partitioned=False)
    for columns, error_class in [
        (["flag"], "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"),
        (["s"], "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"),
        (["s.b"], "DELTA_CLUSTERING_COLUMNS_DATATYPE_NOT_SUPPORTED"),
    ]:
        with pytest.raises(errors.InvalidArgumentError) as e:
            cluster_by(root, columns)
        assert e.value.error_class == error_class, columns
    set_table_properties(root, {"delta.dataSkippingNumIndexedCols": "1"})
    with pytest.raises(errors.InvalidArgumentError) as e:
        cluster_by(root, ["name"])  # a string, but past the first indexed column
    assert e.value.error_class == "DELTA_CLUSTERING_COLUMN_MISSING_STATS"
    before = _version(root)
    assert cluster_by(root, ["id"]) == before + 1
    assert clustering_columns(DeltaLog.for_table(root).update()) == ("id",)
