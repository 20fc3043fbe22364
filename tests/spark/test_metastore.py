"""Delta table names in a Hive metastore (Derby, in a temporary folder): a table saved by name in
one session is, in a second session on the same metastore, listed by ``SHOW TABLES``, described
by Spark itself (before deltalog is registered) as provider ``delta`` at its location, and read,
changed, renamed and dropped by name through deltalog, on a classic session and over Spark
Connect. A name deltalog's registry recorded before
(``.deltalog_catalog``) still resolves. delta-rs reads the locations the metastore records.

Each session is a process of its own (a Hive session is a JVM of its own), so this runs under
``./dev servers`` (CI runs it), not in ``./dev test``."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from deltalog.catalog import Catalog, TableEntry
from tests.spark.scripts import run_script

pytestmark = [pytest.mark.spark, pytest.mark.servers]

SESSION = textwrap.dedent(
    """
    import json, logging, sys
    from pyspark.sql import SparkSession

    base = sys.argv[1]
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.sql.warehouse.dir", base + "/warehouse")
        .config(
            "spark.hadoop.javax.jdo.option.ConnectionURL",
            "jdbc:derby:;databaseName=" + base + "/metastore_db;create=true",
        )
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .enableHiveSupport()
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    logging.getLogger("SQLQueryContextLogger").setLevel(100)
    """
)

WRITER = SESSION + textwrap.dedent(
    """
    import deltalog

    deltalog.register(spark)
    frame = spark.range(0, 4).selectExpr("id", "cast(id % 2 as string) as p")
    frame.write.format("delta").partitionBy("p").saveAsTable("t")
    spark.range(4, 6).selectExpr("id", "cast(id % 2 as string) as p").write.format(
        "delta"
    ).mode("append").saveAsTable("t")
    spark.sql(f"CREATE TABLE ext USING delta LOCATION '{base}/ext'")
    spark.stop()
    print("RESULT" + json.dumps({"ok": True}))
    """
)

READER = SESSION + textwrap.dedent(
    """
    def info(name):
        rows = spark.sql(f"SHOW TABLE EXTENDED IN default LIKE '{name}'").collect()
        lines = (ln.partition(": ") for ln in rows[0].information.splitlines())
        return {k: v for k, _, v in lines}

    # Spark itself, before deltalog is registered: what any engine on the metastore sees.
    plain = {n: info(n) for n in ("t", "ext")}
    import deltalog
    from deltalog.tables import DeltaTable

    deltalog.register(spark)
    tables = sorted(r.tableName for r in spark.sql("SHOW TABLES").collect())
    described = {
        r.col_name: r.data_type for r in spark.sql("DESCRIBE TABLE EXTENDED t").collect()
    }
    latest = sorted(r.id for r in spark.table("t").collect())
    first = sorted(r.id for r in spark.sql("SELECT id FROM t VERSION AS OF 0").collect())
    spark.sql("DELETE FROM t WHERE id = 0")
    DeltaTable.forName(spark, "t").update("id = 1", {"p": "'x'"})
    history = [h.operation for h in DeltaTable.forName(spark, "t").history().collect()]
    old = sorted(r.id for r in spark.table("old").collect())
    spark.sql("ALTER TABLE t RENAME TO t2")
    spark.sql("DROP TABLE ext")
    after = sorted(r.tableName for r in spark.sql("SHOW TABLES").collect())
    moved = info("t2")

    # Spark Connect, served by this session's JVM (same metastore).
    import os, socket
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    context = spark.sparkContext._jsc.sc()
    context.conf().set("spark.connect.grpc.binding.port", str(port))
    spark._jvm.org.apache.spark.sql.connect.service.SparkConnectService.start(context)
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    remote = ConnectSession.builder.remote(f"sc://localhost:{port}").getOrCreate()
    remote.range(7, 9).write.format("delta").saveAsTable("tc")
    api = remote.catalog.createTable("api", path=base + "/api", source="delta")
    connect = {
        "api": sorted(r.v for r in api.collect()),
        "api_info": info("api"),
        "rows": sorted(r.id for r in remote.table("t2").collect()),
        "tc": sorted(r.id for r in remote.sql("SELECT id FROM tc").collect()),
        "info": info("tc"),
    }
    remote.sql("DROP TABLE tc")
    try:
        spark.range(1).write.format("delta").saveAsTable("nodb.t")
        missing = None
    except Exception as e:
        missing = getattr(e, "error_class", None) or type(e).__name__
    spark.stop()
    print("RESULT" + json.dumps({
        "plain": plain, "tables": tables, "described": described, "latest": latest,
        "first": first, "history": history, "old": old, "after": after, "moved": moved,
        "connect": connect, "missing": missing,
    }))
    """
)


def _path(uri: str) -> str:
    return uri[len("file:") :] if uri.startswith("file:") else uri


def test_names_live_in_the_hive_metastore(tmp_path: Path) -> None:
    base = str(tmp_path)
    deltalake.write_deltalake(f"{base}/ext", pa.table({"k": [7, 8]}))
    deltalake.write_deltalake(f"{base}/api", pa.table({"v": [3]}))
    # A name deltalog's registry recorded before it used the metastore.
    deltalake.write_deltalake(f"{base}/old", pa.table({"id": [10, 11]}))
    Catalog(f"{base}/warehouse").register(TableEntry("default", "old", f"{base}/old", False))

    run_script(WRITER, base)
    registry = tmp_path / "warehouse" / ".deltalog_catalog" / "default"
    assert sorted(p.name for p in registry.iterdir()) == ["old.json"]  # new names: metastore

    got = run_script(READER, base)
    managed, external = got["plain"]["t"], got["plain"]["ext"]
    assert (managed["Provider"], managed["Type"]) == ("delta", "MANAGED")
    assert _path(managed["Location"]) == f"{base}/warehouse/t"
    assert (external["Provider"], external["Type"]) == ("delta", "EXTERNAL")
    assert _path(external["Location"]) == f"{base}/ext"
    # No columns recorded, as delta-spark's DeltaCatalog: the log holds the schema.
    assert not [k for k in {**managed, **external} if k.lstrip().startswith("|--")]
    assert got["tables"] == ["ext", "old", "t"]
    assert got["described"]["Provider"] == "delta"
    assert got["described"]["Type"] == "MANAGED"
    assert _path(got["described"]["Location"]) == f"{base}/warehouse/t"
    assert got["described"]["# Partition Information"] == ""
    assert got["latest"] == [0, 1, 2, 3, 4, 5]
    assert got["first"] == [0, 1, 2, 3]
    assert got["history"][:2] == ["UPDATE", "DELETE"]
    assert got["old"] == [10, 11]

    # Renamed: Spark moved the managed folder; dropped: the external table's files stay.
    assert got["after"] == ["old", "t2"]
    assert _path(got["moved"]["Location"]) == f"{base}/warehouse/t2"
    assert not os.path.exists(f"{base}/warehouse/t")
    rows = deltalake.DeltaTable(f"{base}/warehouse/t2").to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["p"]) for r in rows) == [
        (1, "x"), (2, "0"), (3, "1"), (4, "0"), (5, "1")
    ]  # fmt: skip
    connect = got["connect"]
    assert connect["rows"] == [1, 2, 3, 4, 5] and connect["tc"] == [7, 8]
    assert connect["api"] == [3] and connect["api_info"]["Provider"] == "delta"
    assert _path(connect["api_info"]["Location"]) == f"{base}/api"
    assert (connect["info"]["Provider"], connect["info"]["Type"]) == ("delta", "MANAGED")
    # A dropped managed table's files go (Spark deletes them); no files for an unknown database.
    assert not os.path.exists(f"{base}/warehouse/tc")
    assert got["missing"] == "SCHEMA_NOT_FOUND" and not os.path.exists(f"{base}/warehouse/nodb.db")
    assert deltalake.DeltaTable(f"{base}/ext").to_pyarrow_table().column("k").to_pylist() == [7, 8]
