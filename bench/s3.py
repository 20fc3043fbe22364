"""Object stores: deltalog against delta-rs (``deltalake``) on the same S3 endpoint, one run.

A moto S3 server runs in its own process on 127.0.0.1 (so its Python does not share the
benchmark's interpreter lock). Two measurements, as medians of alternating runs, with the ratio
deltalog / deltalake (below 1.0 deltalog is faster):

1. snapshot load of a 100k-file log (shared/bench/make_log.py: 1000 commits x 110 adds, a
   delta-rs checkpoint, 9 tail commits), uploaded to the bucket: a fresh
   ``DeltaLog.for_table(uri, storage_options=...).update().all_files_arrow()`` against
   ``DeltaTable(uri, storage_options=...).get_add_actions()``;
2. a 1M-row scan (10 files of 100k rows, written by delta-rs): every file read through the
   storage seam into logical rows (what the Python data source's workers do), 4 threads, against
   ``DeltaTable(...).to_pyarrow_table()``.

moto answers far slower than S3 per request, and both libraries pay that; the ratio is the
figure to read. Run by hand: ``./dev bench s3`` (``--skip-snapshot`` for the scan only).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from snapshot import ensure_log  # bench/ is on sys.path when run as a script
from timing import timed


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            urllib.request.urlopen(endpoint + "/", timeout=1).read()
            return proc, endpoint
        except Exception:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("moto server did not start")


def options(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_REGION": "us-east-1",
    }


def upload_log(local: Path, uri: str, opts: dict[str, str]) -> int:
    """Copy ``local``'s ``_delta_log`` to ``uri`` through deltalog's store (8 threads)."""
    from deltalog.storage import store_for

    store = store_for(uri, opts)
    files = sorted((local / "_delta_log").iterdir())

    def put(p: Path) -> None:
        store.overwrite(f"{uri}/_delta_log/{p.name}", p.read_bytes())

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(put, files))
    return len(files)


def bench_snapshot(endpoint: str, opts: dict[str, str], repeat: int) -> None:
    import deltalake

    from deltalog.delta_log import DeltaLog

    uri = "s3://bench/log100k"
    started = time.perf_counter()
    n = upload_log(ensure_log("100k"), uri, opts)
    print(f"uploaded {n} log files in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    def ours() -> int:
        DeltaLog.clear_cache()
        log = DeltaLog.for_table(uri, storage_options=opts, engine="driver")
        return log.update().all_files_arrow().num_rows

    def theirs() -> int:
        return deltalake.DeltaTable(uri, storage_options=opts).get_add_actions().num_rows

    report("snapshot load, 100k-file log", ours, theirs, repeat)


def bench_scan(endpoint: str, opts: dict[str, str], repeat: int) -> None:
    import deltalake
    import numpy as np
    import pyarrow as pa

    from deltalog.data_files import read_parquet, to_logical
    from deltalog.delta_log import DeltaLog
    from deltalog.paths import resolve

    uri = "s3://bench/scan1m"
    rng = np.random.default_rng(7)
    rs_opts = {**opts, "conditional_put": "etag"}
    for i in range(10):
        ids = np.arange(i * 100_000, (i + 1) * 100_000, dtype=np.int64)
        part = pa.table({"id": ids, "value": rng.random(100_000), "tag": (ids % 97).astype(str)})
        deltalake.write_deltalake(uri, part, mode="append", storage_options=rs_opts)

    def ours() -> int:
        DeltaLog.clear_cache()
        snap = DeltaLog.for_table(uri, storage_options=opts).update()
        rows = snap.all_files_arrow().select(["path", "partitionValues"]).to_pylist()

        def one(row: dict[str, Any]) -> pa.Table:
            data = read_parquet(resolve(snap.table_root, row["path"]), snap.table_root)
            values = dict(row["partitionValues"] or [])
            return to_logical(data, snap.schema, [], snap.column_mapping_mode, values)

        with ThreadPoolExecutor(4) as pool:
            return pa.concat_tables(pool.map(one, rows)).num_rows

    def theirs() -> int:
        return deltalake.DeltaTable(uri, storage_options=opts).to_pyarrow_table().num_rows

    report("scan, 1M rows in 10 files", ours, theirs, repeat)


def report(what: str, ours: Any, theirs: Any, repeat: int) -> None:
    ours(), theirs()  # warm: connection pools, imports
    t_ours, n_ours, t_theirs, n_theirs = 0.0, 0, 0.0, 0
    runs_ours, runs_theirs = [], []
    for _ in range(repeat):  # alternate, so the noisy machine hurts both alike
        t, n_ours = timed(ours, 1)
        runs_ours.append(t)
        t, n_theirs = timed(theirs, 1)
        runs_theirs.append(t)
    t_ours, t_theirs = sorted(runs_ours)[repeat // 2], sorted(runs_theirs)[repeat // 2]
    assert n_ours == n_theirs, (n_ours, n_theirs)
    print(
        f"{what:34s} deltalog {t_ours:7.3f} s   deltalake {t_theirs:7.3f} s   "
        f"ratio {t_ours / t_theirs:5.2f}   ({n_ours} rows)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-snapshot", action="store_true")
    parser.add_argument("--skip-scan", action="store_true")
    args = parser.parse_args()
    proc, endpoint = start_moto()
    try:
        opts = options(endpoint)
        req = urllib.request.Request(f"{endpoint}/bench", method="PUT")
        urllib.request.urlopen(req).read()
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
        if not args.skip_snapshot:
            bench_snapshot(endpoint, opts, args.repeat)
        if not args.skip_scan:
            bench_scan(endpoint, opts, args.repeat)
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
