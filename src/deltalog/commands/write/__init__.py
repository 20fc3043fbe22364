"""Writes into a table (reference ``WriteIntoDelta``): the write plan and its commit, the
Python writer, the rules written rows must pass, identity values, copy-on-write replaceWhere."""
