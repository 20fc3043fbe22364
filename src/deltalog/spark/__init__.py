"""The Spark layer: the only code that imports pyspark. Works on classic and Connect sessions."""
