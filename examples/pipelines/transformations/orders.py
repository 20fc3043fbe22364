"""Order events from JSON files into Delta tables with Spark Declarative Pipelines, no jars.

Nothing here imports deltalog: ``format="delta"`` is deltalog's Python data source, which Spark
registers in every session of the server because deltalog is installed in the Python its
workers run (the ``pyspark_deltalog`` package). Run it from the repository root::

    PYSPARK_PYTHON=$(which python) spark-pipelines run --spec examples/pipelines/spark-pipeline.yml

* ``raw_orders``: a streaming view of the JSON files in ``landing/`` (new files each run).
* bronze: every event as it came, plus when it was ingested, appended to the Delta table
  ``<root>/bronze/orders`` (a sink: ``create_sink(format="delta", options={"path": ...})``).
* silver: the valid orders (an id, a positive amount), status normalised, partitioned by
  day, appended to ``<root>/silver/orders``.

Every micro-batch is one Delta commit carrying ``txn(appId=<query id>, version=<batch id>)``,
so a flow restarted after a failure never writes a batch twice. Read the tables with any Delta
reader (deltalake, DuckDB, ``spark.read.format("delta")``).

Why sinks and not ``@dp.table(format="delta")`` / ``@dp.materialized_view(format="delta")``:
Spark writes a pipeline's tables as catalog tables, and hands a Python data source no name,
location or option for a catalog table (it fails with ``DELTA_PATH_NOT_SPECIFIED``); a sink is
written by its path. See the README's "Spark Declarative Pipelines" section.
"""

from pathlib import Path

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

spark = SparkSession.active()
ROOT = spark.conf.get("spark.deltalog.example.root", "/tmp/deltalog-pipeline")
LANDING = spark.conf.get(
    "spark.deltalog.example.landing", str(Path(__file__).parents[1] / "landing")
)
SCHEMA = "order_id long, customer string, amount double, status string, ts timestamp"


@dp.temporary_view
def raw_orders() -> DataFrame:
    return spark.readStream.schema(SCHEMA).json(LANDING)


dp.create_sink("bronze_orders", format="delta", options={"path": f"{ROOT}/bronze/orders"})


@dp.append_flow(target="bronze_orders")
def bronze() -> DataFrame:
    return spark.readStream.table("raw_orders").withColumn("ingested_at", F.current_timestamp())


dp.create_sink(
    "silver_orders",
    format="delta",
    options={"path": f"{ROOT}/silver/orders", "partitionBy": "day"},
)


@dp.append_flow(target="silver_orders")
def silver() -> DataFrame:
    valid = spark.readStream.table("raw_orders").where("order_id IS NOT NULL AND amount > 0")
    return valid.select(
        "order_id",
        "customer",
        "amount",
        F.lower("status").alias("status"),
        "ts",
        F.to_date("ts").alias("day"),
    )
