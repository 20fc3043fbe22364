"""The cost of deltalog's ``spark.sql`` bridge on statements that are not Delta's.

Prints the median time of ``spark.sql(text)`` (building the DataFrame, which is what the
bridge touches) and of ``.collect()`` with and without the bridge, and the parser's own time.
Usage: ``./dev bench sql_bridge``.
"""

from __future__ import annotations

from timing import timed  # bench/ is on sys.path when a benchmark runs

STATEMENTS = ["SELECT 1", "SELECT id * 2 AS x FROM range(10) WHERE id > 3"]


def main() -> None:
    from deltalog.spark.session import get_or_create_session
    from deltalog.sql.statements import parse

    spark = get_or_create_session()
    for text in STATEMENTS:
        before, _ = timed(lambda t=text: spark.sql(t), repeat=21)
        collected_before, _ = timed(lambda t=text: spark.sql(t).collect(), repeat=11)
        import deltalog

        deltalog.register(spark)
        after, _ = timed(lambda t=text: spark.sql(t), repeat=21)
        collected_after, _ = timed(lambda t=text: spark.sql(t).collect(), repeat=11)
        parsing, _ = timed(lambda t=text: parse(t), repeat=101)
        print(
            f"{text!r}: spark.sql {before * 1e3:.2f} ms -> {after * 1e3:.2f} ms "
            f"(x{after / before:.2f}); with collect {collected_before * 1e3:.2f} ms -> "
            f"{collected_after * 1e3:.2f} ms (x{collected_after / collected_before:.2f}); "
            f"parse alone {parsing * 1e3:.3f} ms"
        )
        from deltalog.spark.patches.sql_session import _session_classes

        for cls in _session_classes():  # unwrap for the next statement's 'before'
            cls.sql = cls._deltalog_original_sql
            cls._deltalog_sql = False
    spark.stop()


if __name__ == "__main__":
    main()
