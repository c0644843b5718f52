"""The sidecar: a watcher and a Huey consumer that keep a compacted view next to every session.

`work` (what the tasks do), `app` (the Huey wiring and schedules), `watcher`, `records` (its own
database), `status`, `cli` (its verbs).
"""
