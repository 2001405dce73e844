"""Apache James distributed mail queue: Cassandra view tables, configuration history, blobs."""
