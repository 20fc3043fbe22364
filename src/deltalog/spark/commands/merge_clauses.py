"""MERGE's clauses (reference ``DeltaMergeIntoClause``): which clause acts on a row, and the
value each writes into every target column.

A target row matched by a source row takes the first ``whenMatched`` clause whose condition
holds, an unmatched source row the first ``whenNotMatched`` clause, an unmatched target row the
first ``whenNotMatchedBySource`` clause (:meth:`ClauseActions.action`); the acting clause's
assignments, else the target's value, give each column (:meth:`ClauseActions.values`). Both
phases of :mod:`deltalog.spark.commands.merge` build their columns from these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql import functions as F

from deltalog import errors
from deltalog.column_defaults import CURRENT_DEFAULT
from deltalog.commands.dml.file_changes import CHANGE_TYPE
from deltalog.commands.write.identity import IdentityColumn, identity_columns
from deltalog.schema import StructType
from deltalog.spark.commands.dml import GENERATION_KEY
from deltalog.spark.conditions import condition_column, condition_sql, is_true
from deltalog.spark.schema import to_spark_schema
from deltalog.txn.operations import MergePredicate

SOURCE_PRESENT, TARGET_PRESENT, ACTION, SOURCE_ID = (
    "__deltalog_source",
    "__deltalog_target",
    "__deltalog_action",
    "__deltalog_source_row",
)
MATCHED_ACTION = "__deltalog_matched_action"  # a matched source row's clause (phase 2)
COPY = -1  # a matched pair no clause acts on (kept for the multiple-match check)
MATCHED, NOT_MATCHED, BY_SOURCE = "matched", "notMatched", "notMatchedBySource"


@dataclass(frozen=True, slots=True)
class MergeClause:
    """One WHEN clause.

    Attributes:
        kind: ``matched``, ``notMatched`` or ``notMatchedBySource``.
        action: ``update``, ``delete`` or ``insert``.
        condition: SQL text or Column, ``None`` for always.
        assignments: target column → SQL text or Column; ``None`` for ``*`` (all columns).
    """

    kind: str
    action: str
    condition: Any = None
    assignments: Mapping[str, Any] | None = None

    def describe(self, frame: Any = None) -> MergePredicate:
        """The clause for ``commitInfo``; ``frame`` resolves a Column condition."""
        text = None if self.condition is None else condition_sql(self.condition, frame)
        return MergePredicate(self.action, text)


class MergeSpec(Protocol):
    """What a MERGE is asked to do (a
    :class:`~deltalog.spark.api.merge_builder.DeltaMergeBuilder`)."""

    @property
    def _table(self) -> Any: ...  # the target: a deltalog.spark.api.delta_table.DeltaTable

    @property
    def _source(self) -> Any: ...  # the source DataFrame

    @property
    def _condition(self) -> Any: ...  # the ON condition: SQL text or a Column

    @property
    def _clauses(self) -> tuple[MergeClause, ...]: ...

    @property
    def _evolve(self) -> bool: ...


def check_clauses(clauses: tuple[MergeClause, ...], table: str) -> None:
    """delta-spark's checks: at least one clause; only the last of each kind may omit its
    condition.

    Raises:
        InvalidArgumentError: no clause, or a non-last clause without condition.
    """
    if not clauses:
        raise errors.merge_missing_when(table)
    for kind in (MATCHED, NOT_MATCHED, BY_SOURCE):
        of_kind = [c for c in clauses if c.kind == kind]
        if any(c.condition is None for c in of_kind[:-1]):
            raise errors.non_last_clause_omits_condition(kind, table)


@dataclass(frozen=True)
class ClauseActions:
    """The clauses of one MERGE over its (maybe evolved) target schema.

    Attributes:
        clauses: the WHEN clauses, in order (a clause's index is its id in the plans).
        target_schema: the target's schema after the merge.
        old_names: the target's column names before the merge, lower-cased.
        source: the source DataFrame as given (``*`` and assignments resolve against it).
        evolve: whether schema evolution is on.
        root: the table's root, for messages.
    """

    clauses: tuple[MergeClause, ...]
    target_schema: StructType
    old_names: frozenset[str]
    source: Any
    evolve: bool
    root: str

    def ids(self, *actions: str) -> list[int]:
        return [i for i, c in enumerate(self.clauses) if c.action in actions]

    def action(self, df: Any, kinds: set[str]) -> Any:
        """The index of the clause acting on each joined row (NULL: none)."""
        matched = df[TARGET_PRESENT].isNotNull() & df[SOURCE_PRESENT].isNotNull()
        where = {
            MATCHED: matched,
            NOT_MATCHED: df[TARGET_PRESENT].isNull(),
            BY_SOURCE: df[SOURCE_PRESENT].isNull(),
        }
        expr = None
        for i, clause in enumerate(self.clauses):
            if clause.kind not in kinds:
                continue
            test = where[clause.kind]
            if clause.condition is not None:
                test = test & is_true(condition_column(clause.condition))
            expr = F.when(test, F.lit(i)) if expr is None else expr.when(test, F.lit(i))
        return expr if expr is not None else F.lit(None).cast("int")

    def values(self, joined: Any, target: Any | None, kinds: set[str]) -> list[Any]:
        """The final value of each target column: the acting clause's assignment, else the
        target's value (NULL for an inserted row or a column new to the table)."""
        return [value.alias(name) for name, value in self.value_exprs(joined, target, kinds)]

    def value_exprs(
        self, joined: Any, target: Any | None, kinds: set[str], *, acted_only: bool = False
    ) -> list[tuple[str, Any]]:
        """(column, expression) pairs of :meth:`values`; ``acted_only``: the rows are those
        an updating clause acts on, so a column every such clause assigns never falls back to
        the target's value (and the target's column need not be read for it)."""
        act = F.col(ACTION)
        out = []
        old_names = self.old_names
        assigned_anywhere = self.assigned_columns()
        identities = {c.name.lower(): c for c in identity_columns(self.target_schema)}
        for f, sf in zip(
            self.target_schema.fields, to_spark_schema(self.target_schema).fields, strict=True
        ):
            if GENERATION_KEY in f.metadata and f.name.lower() not in assigned_anywhere:
                continue  # computed by the writer from the final values
            old = (
                target[f"`{f.name}`"]
                if target is not None and f.name.lower() in old_names
                else F.lit(None)
            ).cast(sf.dataType)
            complete = True
            generating: list[int] = []  # insert clauses whose rows get new identity values
            identity = identities.get(f.name.lower())
            branches: list[tuple[Any, Any]] = []
            for i, clause in enumerate(self.clauses):
                if clause.action == "delete" or clause.kind not in kinds:
                    continue
                expr = self.assignment(clause, f.name, old)
                if expr is None and identity is not None and clause.action == "insert":
                    generating.append(i)
                elif expr is None:
                    complete = False
                else:
                    branches.append((act == i, expr.cast(sf.dataType)))
            if generating:
                assert identity is not None
                # One generator for all of them: two would each count from 0 in a task.
                branches.insert(0, (act.isin(generating), _identity_values(identity)))
            value = None
            for test, expr in branches:
                value = F.when(test, expr) if value is None else value.when(test, expr)
            if value is None:
                out.append((f.name, old))
            elif acted_only and complete:
                out.append((f.name, value))
            else:
                out.append((f.name, value.otherwise(old)))
        return out

    def assigned_columns(self) -> set[str]:
        names: set[str] = set()
        for clause in self.clauses:
            if clause.assignments is None:
                names |= {n.lower() for n in self.source.columns}
            else:
                names |= {k.strip("`").rsplit(".", 1)[-1].lower() for k in clause.assignments}
        return names

    def assignment(self, clause: MergeClause, column: str, old: Any) -> Any | None:
        """The clause's expression for ``column``; ``None`` keeps the target's value (UPDATE)
        or leaves it NULL (INSERT).

        Raises:
            InvalidArgumentError: ``*`` without schema evolution and no source column of that
                name; an assignment to a column the table does not have.
        """
        if clause.assignments is None:
            source_column = find_column(self.source.columns, column)
            if source_column is not None:
                return self.source[f"`{source_column}`"]
            if not self.evolve:
                raise errors.merge_unresolved(
                    f"`{column}`",
                    f"{clause.kind} {clause.action} *",
                    self.source.columns,
                    self.root,
                )
            return None if clause.action == "update" else self._implicit(column)
        for key, value in clause.assignments.items():
            if key.strip("`").rsplit(".", 1)[-1].lower() == column.lower():
                return condition_column(value)
        return self._implicit(column) if clause.action == "insert" else None

    def _implicit(self, column: str) -> Any | None:
        """An insert's value for a column it does not give (reference
        ``PreprocessTableMerge``): the column's default, else ``None`` (NULL, or a new identity
        value: :meth:`value_exprs`)."""
        sql = self.target_schema.field(column).metadata.get(CURRENT_DEFAULT)
        return None if sql is None else F.expr(str(sql))

    def generated_identity(self) -> list[str]:
        """The identity columns some insert clause leaves out: their values are generated."""
        inserts = [c for c in self.clauses if c.action == "insert"]
        return [
            c.name
            for c in identity_columns(self.target_schema)
            if any(not self._gives(clause, c.name) for clause in inserts)
        ]

    def _gives(self, clause: MergeClause, column: str) -> bool:
        """Whether ``clause`` gives ``column`` a value (``*``: the source has the column)."""
        if clause.assignments is None:
            return find_column(self.source.columns, column) is not None
        return any(_key(k) == column.lower() for k in clause.assignments)

    def check_assignment_keys(self) -> None:
        """Every assigned column is a column of the (evolved) target; none is an identity
        column (UPDATE, ``UPDATE *`` included; an INSERT giving a GENERATED ALWAYS one a
        value)."""
        names = {f.name.lower(): f for f in self.target_schema.fields}
        for clause in self.clauses:
            for key in clause.assignments or {}:
                field = names.get(key.strip("`").rsplit(".", 1)[-1].lower())
                if field is None:
                    raise errors.unresolved_column(
                        key, f"MERGE {clause.action}", self.target_schema.names, self.root
                    )
        self._check_identity()

    def _check_identity(self) -> None:
        """No update sets an identity column, no insert gives a GENERATED ALWAYS one a value
        (``*`` sets them from the source's column of that name), as in the reference.

        Raises:
            UnsupportedFeatureError: ``DELTA_IDENTITY_COLUMNS_UPDATE_NOT_SUPPORTED``,
                ``DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED``.
        """
        for c in identity_columns(self.target_schema):
            for clause in self.clauses:
                if clause.action == "update" and self._gives(clause, c.name):
                    raise errors.identity_update(c.name, self.root)
                explicit = clause.action == "insert" and not c.allow_explicit_insert
                if explicit and self._gives(clause, c.name):
                    raise errors.identity_explicit_insert(c.name, self.root)

    def change_rows(self, joined: Any, values: list[Any], target: Any | None) -> Any:
        """``update_preimage``/``update_postimage``, ``delete`` and ``insert`` rows of a frame
        with its clause column (old values from ``target``'s columns, if any)."""
        act = F.col(ACTION)
        names = [f.name for f in self.target_schema.fields]
        old_names = self.old_names if target is not None else frozenset()
        old = [
            (
                target[f"`{f.name}`"]
                if target is not None and f.name.lower() in old_names
                else F.lit(None)
            )
            .cast(sf.dataType)
            .alias(f.name)
            for f, sf in zip(
                self.target_schema.fields, to_spark_schema(self.target_schema).fields, strict=True
            )
        ]
        new = joined.select(*values, act)
        for f in self.target_schema.fields:
            if GENERATION_KEY in f.metadata and f.name not in new.columns:
                new = new.withColumn(f.name, F.expr(str(f.metadata[GENERATION_KEY])))
        new = new.select(*[F.col(f"`{n}`") for n in names], act)
        updates, deletes, inserts = (
            self.ids("update"),
            self.ids("delete"),
            self.ids("insert"),
        )
        pre_or_delete = joined.where(act.isin(updates + deletes)).select(
            *old,
            F.when(act.isin(updates), F.lit("update_preimage"))
            .otherwise(F.lit("delete"))
            .alias(CHANGE_TYPE),
        )
        post_or_insert = new.where(act.isin(updates + inserts)).select(
            *[F.col(f"`{n}`") for n in names],
            F.when(act.isin(updates), F.lit("update_postimage"))
            .otherwise(F.lit("insert"))
            .alias(CHANGE_TYPE),
        )
        return pre_or_delete.unionByName(post_or_insert)


def _key(assigned: str) -> str:
    """An assignment key's column (``t.c`` / ```c``` -> ``c``), lower-cased."""
    return assigned.strip("`").rsplit(".", 1)[-1].lower()


def _identity_values(c: IdentityColumn) -> Any:
    """New values of identity column ``c``: unique across tasks (the partition id is in the
    high bits of ``monotonically_increasing_id``), past the high-water mark in steps of
    ``step`` (as the writer generates them, :mod:`deltalog.spark.write.batch`)."""
    value = F.lit(c.first_value) + F.lit(c.step) * F.monotonically_increasing_id()
    return value.cast("long")


def find_column(names: list[str], name: str) -> str | None:
    """The name among ``names`` equal to ``name`` ignoring case."""
    return next((n for n in names if n.lower() == name.lower()), None)
