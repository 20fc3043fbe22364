"""The transaction log: file names, segments, replay, reading actions, history."""
