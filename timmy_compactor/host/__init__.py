"""What Hermes Agent is, as the rest of the package needs to know it: its home and what its
`config.yaml` and context-length cache say (`home`), the tool schemas its requests carry (`tools`),
how large a tool result it passes on unchanged (`budget`), and what it calls things (`names`: our
engine's name, its compaction markers).

A leaf: it imports no other module of ours, and never Hermes itself in this process (the tool
schemas are asked of Hermes in a fresh one). The plugin that runs inside Hermes is `hermes/`.
"""
