"""`timmy-compactor eval`: every strategy side by side on real sessions, with a readable report."""
