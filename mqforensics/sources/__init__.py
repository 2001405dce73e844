"""Readers more than one system uses: Cassandra token scans and connections, CQL values, S3
listings and Inventory reports, Parquet footers. They know bytes and protocols, not anomalies."""
