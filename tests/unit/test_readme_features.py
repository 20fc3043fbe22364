"""README's table of table features says what :mod:`deltalog.features` does: every feature the
reference lists appears once, with read and write as the support sets give them."""

from __future__ import annotations

from pathlib import Path

from deltalog import features

README = Path(__file__).resolve().parents[2] / "README.md"


def _rows() -> dict[str, tuple[str, str, str]]:
    text = README.read_text(encoding="utf-8")
    section = text.split("## Table features", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, str, str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0].startswith("`"):
            name = cells[0].strip("`")
            assert name not in rows, f"{name} listed twice"
            rows[name] = (cells[1], cells[2], cells[3])
    return rows


def test_every_feature_is_listed_with_what_deltalog_does() -> None:
    rows = _rows()
    assert set(rows) == set(features.TABLE_FEATURES)
    for name, feature in features.TABLE_FEATURES.items():
        kind = "reader-writer" if feature.reader_writer else "writer"
        readable = not feature.reader_writer or name in features.SUPPORTED_READER_FEATURES
        writable = name in features.SUPPORTED_WRITER_FEATURES
        want = (kind, "yes" if readable else "refused", "yes" if writable else "refused")
        assert rows[name] == want, name
