"""Writes examples/tables/trips, the small real table the demo reads (run once; committed).

It is written by delta-rs (the ``deltalake`` package), not by deltalog, so the demo shows
deltalog reading another implementation's table: partitioned, with appends, a delete, an update,
a checkpoint and commits after it.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

ROOT = Path(__file__).resolve().parent / "tables" / "trips"


def batch(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "trip_id": pa.array(ids, pa.int64()),
            "city": pa.array([("Lisbon", "Oslo", "Lima")[i % 3] for i in ids]),
            "distance_km": pa.array([round(1.5 + (i * 7 % 40) / 3, 2) for i in ids], pa.float64()),
            "fare": pa.array([round(3 + i * 0.85, 2) for i in ids], pa.float64()),
        }
    )


def main() -> None:
    if ROOT.exists():
        shutil.rmtree(ROOT)
    write_deltalake(
        str(ROOT),
        batch(0, 30),
        partition_by=["city"],
        name="trips",
        description="taxi trips, a deltalog demo table",
        configuration={"delta.enableChangeDataFeed": "true"},
    )
    write_deltalake(str(ROOT), batch(30, 30), mode="append")
    table = DeltaTable(str(ROOT))
    table.delete("fare > 45")
    table.update(updates={"fare": "fare * 1.1"}, predicate="city = 'Oslo'")
    table.create_checkpoint()
    write_deltalake(str(ROOT), batch(100, 12), mode="append")
    print(f"wrote {ROOT} at version {DeltaTable(str(ROOT)).version()}", file=sys.stderr)


if __name__ == "__main__":
    main()
