"""Real servers for tests and local work (Cassandra 5.0, SeaweedFS S3), bound to 127.0.0.1."""
