"""The read entry points over Spark Connect and on local-cluster (separate executor JVMs).

Each tier runs in a subprocess with its own session, so it never shares a JVM with the suite's
classic session. Rows are compared with the classic toDF() read of the same tables.
"""

from __future__ import annotations

from typing import Any

import pytest

from deltalog.spark.session import to_arrow
from tests.conformance.oracle import TABLES
from tests.conformance.rows import canonical
from tests.spark.scripts import run_script
from tests.spark.test_scan import HAS_DATA_SOURCES, ours

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        not HAS_DATA_SOURCES, reason="these tiers need PySpark 4 (bundled Connect, data sources)"
    ),
]

TABLES_TO_READ = [
    str(TABLES / "delta-golden/dv-partitioned-with-checkpoint"),  # DVs + partitions + checkpoint
    str(TABLES / "delta-golden/data-reader-partition-values"),  # typed partition values
]

SCRIPT = r"""
import json, sys
from pyspark.sql import SparkSession
import deltalog
from deltalog.tables import DeltaTable
from deltalog.spark.session import to_arrow
from tests.conformance.rows import canonical
mode, roots = sys.argv[1], sys.argv[2:]
if mode == "connect":
    spark = SparkSession.builder.remote("local[2]").getOrCreate()
else:
    spark = (SparkSession.builder.master("local-cluster[2,1,1024]")
             .config("spark.executor.memory", "768m").config("spark.ui.enabled", "false")
             .getOrCreate())
spark.conf.set("spark.sql.session.timeZone", "UTC")
name = deltalog.register(spark)
out = {}
for root in roots:
    out[root] = {
        "toDF": canonical(to_arrow(DeltaTable.forPath(spark, root).toDF())),
        "format": canonical(to_arrow(spark.read.format(name).load(root))),
        "v0": canonical(to_arrow(spark.read.format(name).option("versionAsOf", "0").load(root))),
    }
print("RESULT" + json.dumps(out))
spark.stop()
"""


def run_tier(mode: str) -> dict[str, Any]:
    result: dict[str, Any] = run_script(SCRIPT, mode, *TABLES_TO_READ)
    return result


@pytest.mark.connect
@pytest.mark.parametrize("mode", ["connect", "local-cluster"])
def test_reads_match_classic(spark: Any, mode: str) -> None:
    result = run_tier(mode)
    for root in TABLES_TO_READ:
        expected = canonical(to_arrow(ours(spark, root)))
        assert expected, root
        assert result[root]["toDF"] == expected
        assert result[root]["format"] == expected
        assert result[root]["v0"] == canonical(to_arrow(ours(spark, root, 0)))
