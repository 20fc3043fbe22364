"""Storage options and URI routing, without a server: names as delta-rs and Hadoop give them,
values never shown, each scheme reaching its store."""

from __future__ import annotations

import pytest

from deltalog.paths import normalize_table_root, resolve
from deltalog.storage import LocalLogStore, StorageOptions, store_for
from deltalog.storage.object_store import ObjectLogStore
from deltalog.storage.options import bucket_of, from_spark_conf


def test_spark_conf_names_become_delta_rs_names() -> None:
    conf = {
        "spark.hadoop.fs.s3a.access.key": "AKIA-ID",
        "spark.hadoop.fs.s3a.secret.key": "s3cr3t",
        "fs.s3a.endpoint": "http://127.0.0.1:9000",
        "fs.s3a.path.style.access": "true",
        "spark.deltalog.storage.aws_region": "eu-west-1",
        "spark.sql.shuffle.partitions": "4",
    }
    options = from_spark_conf(conf)
    assert options.as_dict() == {
        "AWS_ACCESS_KEY_ID": "AKIA-ID",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ALLOW_HTTP": "true",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",
        "AWS_REGION": "eu-west-1",
    }
    assert "s3cr3t" not in repr(options) and "AKIA-ID" not in str(options)
    # Later sources win: per-table options over the session's.
    assert options.merged(StorageOptions.of({"aws_region": "us-east-2"})).get("AWS_REGION") == (
        "us-east-2"
    )


def test_single_writer_opt_in_by_either_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DELTALOG_SINGLE_WRITER", raising=False)
    monkeypatch.delenv("AWS_S3_ALLOW_UNSAFE_RENAME", raising=False)
    assert not StorageOptions.of({}).single_writer()
    assert StorageOptions.of({"DELTALOG_SINGLE_WRITER": "true"}).single_writer()
    assert StorageOptions.of({"aws_s3_allow_unsafe_rename": True}).single_writer()
    monkeypatch.setenv("DELTALOG_SINGLE_WRITER", "1")
    assert StorageOptions.of({}).single_writer()


def test_uris_route_to_their_stores() -> None:
    assert isinstance(store_for("/tmp/t"), LocalLogStore)
    assert isinstance(store_for("file:///tmp/t"), LocalLogStore)
    azure = store_for(
        "abfss://cont@acct.dfs.core.windows.net/tables/t",
        {"AZURE_STORAGE_ACCOUNT_KEY": "a2V5", "azure_storage_account_name": "acct"},
    )
    assert isinstance(azure, ObjectLogStore)
    assert azure.bucket == "abfss://cont@acct.dfs.core.windows.net"
    assert azure.key("abfss://cont@acct.dfs.core.windows.net/tables/t/x.json") == "tables/t/x.json"
    assert "a2V5" not in repr(azure)
    az = store_for(
        "az://cont/t", {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "AZURE_STORAGE_ACCOUNT_KEY": "a2V5"}
    )
    assert isinstance(az, ObjectLogStore) and az.bucket == "az://cont"
    gcs = store_for("gs://bkt/t", {"GOOGLE_SKIP_SIGNATURE": "true"})
    assert isinstance(gcs, ObjectLogStore) and gcs.bucket == "gs://bkt"
    # s3a:// and s3:// name the same bucket; one store (and option set) serves both.
    assert bucket_of("s3a://b/k") == bucket_of("s3://b/x") == "s3://b"


def test_object_store_paths_resolve_in_the_bucket() -> None:
    root = normalize_table_root("s3a://bucket/a/t/")
    assert root == "s3a://bucket/a/t"
    assert resolve(root, "p=x%20y/part-0.parquet") == "s3a://bucket/a/t/p=x y/part-0.parquet"
    assert resolve(root, "s3://other/t/f%3A1.parquet") == "s3://other/t/f:1.parquet"


def test_one_session_serves_every_store() -> None:
    # Settings for S3, Azure and GCS side by side (as in one Spark session's conf): each store
    # takes its own and ignores the others' (the library would refuse a foreign key).
    options = {
        "AWS_REGION": "us-east-1",
        "AZURE_STORAGE_ACCOUNT_NAME": "acct",
        "AZURE_STORAGE_ACCOUNT_KEY": "a2V5",
        "GOOGLE_SKIP_SIGNATURE": "true",
    }
    assert isinstance(store_for("s3://bucket-one/t", options), ObjectLogStore)
    assert isinstance(store_for("az://cont-one/t", options), ObjectLogStore)
    assert isinstance(store_for("gs://bucket-one/t", options), ObjectLogStore)
