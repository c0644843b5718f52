"""Hermes' sessions on disk: the naming rule, raw files and views, and its `state.db`."""
