"""Variant shredding (PROTOCOL.md "Variant Shredding") without Spark.

The table is delta-spark's (Spark 4.0, ``delta.enableVariantShredding=true``): its files hold
shredded variants (``typed_value`` beside ``metadata`` and ``value``), top-level and inside
arrays, structs and maps. pyarrow reads a shredded column as its parts, and a cast to the
unshredded pair would silently drop the shredded fields; so engine-free reads and rewrites
refuse such files by name and leave the table as it was, while writes that read nothing
(the Python writer never shreds, which the protocol allows) go through. Neither deltalake
(refuses ``variantShredding-preview``) nor DuckDB (no Arrow variant) reads these tables: the
expectations come from the files and the protocol.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import deltalog
from deltalog import DeltaLog, errors
from deltalog.data_files import read_parquet, to_logical

# Variant metadata with the keys "a" and "b" (sorted dictionary, 1-byte offsets), and the
# residual object {"b": true} (field id 1 at offset 0, the primitive true).
METADATA = b"\x11\x02\x00\x01\x02ab"
RESIDUAL = b"\x02\x01\x01\x00\x01\x04"
SCHEMA = (
    '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}},'
    '{"name":"v","type":"variant","nullable":true,"metadata":{}}]}'
)


def _shredded_table(root: Path, feature: str = "variantShredding") -> None:
    """A table of two files holding ``{"a": id, "b": true}`` per row, partially shredded
    (PROTOCOL.md "Variant Shredding", Parquet's VariantShredding.md): field ``a`` in
    ``typed_value`` as int64, the rest in ``value``. No ``value`` is null, so a cast to the
    unshredded pair would succeed and lose ``a``."""
    root.mkdir()
    (root / "_delta_log").mkdir()
    adds = []
    for n, ids in enumerate(([1, 2, 3], [4, 5, 6])):
        a = pa.StructArray.from_arrays(
            [pa.nulls(3, pa.binary()), pa.array(ids, pa.int64())], names=["value", "typed_value"]
        )
        v = pa.StructArray.from_arrays(
            [
                pa.array([METADATA] * 3),
                pa.array([RESIDUAL] * 3),
                pa.StructArray.from_arrays([a], ["a"]),
            ],
            names=["metadata", "value", "typed_value"],
        )
        name = f"part-0000{n}-shredded.snappy.parquet"
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "v": v}), root / name)
        stats = {
            "numRecords": 3,
            "minValues": {"id": ids[0]},
            "maxValues": {"id": ids[-1]},
            "nullCount": {"id": 0},
        }
        size = (root / name).stat().st_size
        adds.append(
            {
                "add": {
                    "path": name,
                    "partitionValues": {},
                    "size": size,
                    "modificationTime": 0,
                    "dataChange": True,
                    "stats": json.dumps(stats),
                }
            }
        )
    features = [feature, "variantType"]
    actions = [
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": features,
                "writerFeatures": features,
            }
        },
        {
            "metaData": {
                "id": "t",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": SCHEMA,
                "partitionColumns": [],
                "configuration": {"delta.enableVariantShredding": "true"},
                "createdTime": 0,
            }
        },
        *adds,
    ]
    log = root / "_delta_log" / f"{0:020d}.json"
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))


def _parquet_files(root: Path) -> set[str]:
    return {p.name for p in root.glob("*.parquet")}


def _shredded_columns(path: Path) -> list[str]:
    schema = pq.read_schema(path)
    return [f.name for f in schema if "typed_value" in str(f.type)]


@pytest.mark.parametrize("feature", ["variantShredding", "variantShredding-preview"])
def test_engine_free_reads_and_rewrites_refuse_shredded_files(tmp_path: Path, feature: str) -> None:
    root = tmp_path / "t"
    _shredded_table(root, feature)
    before = _parquet_files(root)
    log = DeltaLog.for_table(str(root))
    version = log.update().version
    path = next(iter(root.glob("*.parquet")))
    with pytest.raises(errors.UnsupportedFeatureError) as e:
        to_logical(read_parquet(str(path), str(root)), log.update().schema, [], "none", {})
    assert e.value.error_class == "DELTA_UNSUPPORTED_SHREDDED_VARIANT"
    assert e.value.features == ("variantShredding",)
    for command in (
        lambda: deltalog.delete(str(root), "id = 2"),
        lambda: deltalog.update(str(root), "id = 2", {"id": 500}),
        lambda: deltalog.optimize(str(root)),
    ):
        with pytest.raises(errors.UnsupportedFeatureError, match="shredded variant"):
            command()
    assert DeltaLog.for_table(str(root)).update().version == version
    assert _parquet_files(root) == before  # files written before the refusal are deleted


def test_the_table_takes_python_appends(tmp_path: Path) -> None:
    """The table supports shredding, so it is writable; the Python writer never shreds
    (pyarrow has no variant type: a variant column it writes is left null)."""
    root = tmp_path / "t"
    _shredded_table(root)
    before = _parquet_files(root)
    version = deltalog.write_table(str(root), pa.table({"id": [4]}), mode="append")
    assert version == 1
    (written,) = _parquet_files(root) - before
    assert _shredded_columns(root / written) == []
    assert pq.read_table(root / written).column("v").to_pylist() == [None]
