"""SHOW CREATE TABLE's text and SHOW TBLPROPERTIES' properties, pure core."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from deltalog.commands.ddl.alter_columns import ColumnChange, change_column, cluster_by
from deltalog.commands.ddl.show import (
    quote_if_needed,
    show_create_table,
    spark_simple_string,
    table_properties,
)
from deltalog.commands.write.write_table import write_table
from deltalog.delta_log import DeltaLog
from deltalog.schema import ArrayType, MapType, PrimitiveType, StructField, StructType


def test_show_create_table_text(tmp_path: Path) -> None:
    root = str(tmp_path / "t")
    rows = pa.table({"id": pa.array([1], pa.int64()), "odd name": ["a"], "p": ["x"]})
    write_table(root, rows, partition_by=["p"], configuration={"owner": "it's me"})
    change_column(root, ColumnChange(("id",), comment="key"))
    snapshot = DeltaLog.for_table(root).update()
    assert show_create_table(snapshot, "spark_catalog.default.t", f"file:{root}") == (
        "CREATE TABLE spark_catalog.default.t (\n"
        "  id BIGINT COMMENT 'key',\n"
        "  `odd name` STRING,\n"
        "  p STRING)\n"
        "USING delta\n"
        "PARTITIONED BY (p)\n"
        f"LOCATION 'file:{root}'\n"
        "TBLPROPERTIES (\n"
        "  'delta.minReaderVersion' = '1',\n"
        "  'delta.minWriterVersion' = '2',\n"
        "  'owner' = 'it\\'s me')\n"
    )


def test_clustered_table_and_feature_properties(tmp_path: Path) -> None:
    root = str(tmp_path / "c")
    write_table(root, pa.table({"a": [1], "b": ["x"]}))
    cluster_by(root, ["b"])
    snapshot = DeltaLog.for_table(root).update()
    props = table_properties(snapshot)
    assert props["delta.feature.clustering"] == "supported"
    assert props["delta.feature.domainMetadata"] == "supported"
    assert props["delta.minWriterVersion"] == "7"
    text = show_create_table(snapshot, "delta.`x`", None)
    assert "\nCLUSTER BY (b)\n" in text and "LOCATION" not in text
    assert "'clusteringColumns' = '[[\"b\"]]'" in text


def test_spark_type_spellings() -> None:
    nested = StructType(
        (
            StructField("x", PrimitiveType("integer"), False),
            StructField("m", MapType(PrimitiveType("string"), ArrayType(PrimitiveType("short")))),
        )
    )
    assert spark_simple_string(nested) == "struct<x:int,m:map<string,array<smallint>>>"
    assert quote_if_needed("a_1") == "a_1" and quote_if_needed("12") == "`12`"
    assert quote_if_needed("a`b") == "`a``b`"
