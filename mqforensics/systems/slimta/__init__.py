"""python-slimta queue storage (disk, Redis, S3): safe readers of its pickles, checks, plans."""
