"""Commands: what a user asks of a table, built from transactions and the write helpers, with
no engine of their own (the Spark layer runs the same commands with Spark writing the data)."""
