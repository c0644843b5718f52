"""What Hermes calls things, defined once (importable without Hermes installed)."""

ENGINE_NAME = "timmy"
"""Our context engine's name in Hermes' `context.engine` and `plugins.enabled`."""

SUMMARY_PREFIXES = ("[CONTEXT COMPACTION", "[CONTEXT SUMMARY]:")
"""How the messages Hermes' own compressor inserts begin (`[CONTEXT COMPACTION — REFERENCE ONLY]`...)."""

# Hermes may merge its summary into the first kept message: header + old content + delimiter + summary.
MERGED_HEADER = "[PRIOR CONTEXT — for reference only; not a new message]"
MERGED_DELIMITER = "[END OF PRIOR CONTEXT — COMPACTION SUMMARY BELOW]"
