"""OPTIMIZE, engine-free: which files to rewrite and how to commit them (``plan``), and the
plain-Python engine (``arrow``)."""
