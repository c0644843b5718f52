"""Names shared by the Hermes plugin and its set-up command (importable without Hermes)."""

ENGINE_NAME = "timmy"
