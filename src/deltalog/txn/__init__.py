"""Transactions: what one commit read and writes, the conflict checker, the committer, the
operations and their ``commitInfo``, and the post-commit hooks. Pure core: no pyspark.

``txn = DeltaLog.for_table(path).start_transaction()``, read through ``txn.filter_files()``,
write data files, then ``txn.commit(actions, operation)``.
"""

from deltalog.txn.operations import Operation
from deltalog.txn.read_set import ReadSet
from deltalog.txn.transaction import Transaction

__all__ = ["Operation", "ReadSet", "Transaction"]
