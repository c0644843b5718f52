"""The pure core: no files, queues, clocks or loggers in here."""
