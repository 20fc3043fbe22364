"""The ``deltalog`` command line."""
