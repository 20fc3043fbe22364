"""``DeltaTable.convertToDelta``, ``clone*``, ``generate`` and the protocol methods on Spark:
delta-spark's API shapes. The semantics are tested without Spark (``tests/unit/test_convert.py``,
``test_clone.py``, ``test_manifest.py``, ``test_protocol_change.py``); Spark is slow, so one test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from deltalog import errors
from deltalog.tables import DeltaTable
from tests.conformance.rows import canonical, oracle_rows


def test_manage_api_shapes(spark: Any, tmp_path: Path) -> None:
    src = tmp_path / "pq"
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "p": ["a", "b", "a"]})
    pq.write_to_dataset(data, src, partition_cols=["p"])
    with pytest.raises(errors.DeltaError) as e:
        DeltaTable.convertToDelta(spark, f"json.`{src}`")
    assert e.value.error_class == "DELTA_CONVERT_NON_PARQUET_TABLE"

    table = DeltaTable.convertToDelta(spark, f"parquet.`{src}`", "p string")
    assert isinstance(table, DeltaTable)
    assert sorted(r.id for r in table.toDF().collect()) == [1, 2, 3]

    table.upgradeTableProtocol(1, 3)
    table.addFeatureSupport("domainMetadata")
    table.dropFeatureSupport("domainMetadata")
    p = deltalake.DeltaTable(str(src)).protocol()
    assert (p.min_reader_version, p.min_writer_version) == (1, 3)
    ops = [r.operation for r in table.history().collect()]
    assert ops[:4] == ["DROP FEATURE", "SET TBLPROPERTIES", "SET TBLPROPERTIES", "CONVERT"]

    shallow = table.cloneAtVersion(0, str(tmp_path / "shallow"), isShallow=True)
    deep = table.clone(str(tmp_path / "deep"), isShallow=False, properties={"k": "v"})
    expected = canonical(oracle_rows(str(src)))
    assert canonical(oracle_rows(str(tmp_path / "shallow"))) == expected
    assert canonical(oracle_rows(str(tmp_path / "deep"))) == expected
    assert shallow.history(1).collect()[0].operation == "CLONE"
    assert deep.detail().collect()[0].properties == {"k": "v"}

    deep.generate("symlink_format_manifest")
    manifests = list((tmp_path / "deep" / "_symlink_format_manifest").rglob("manifest"))
    assert sorted(m.parent.name for m in manifests) == ["p=a", "p=b"]
