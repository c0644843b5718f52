"""One rule per module. Each is `apply(draft, settings) -> (draft, counts)` over the middle."""
