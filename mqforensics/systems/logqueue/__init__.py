"""Log-structured (crash-only) MTA queue segments: the format, and readers of it."""
