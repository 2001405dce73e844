"""The purger: carries out an approved cleanup plan, journaled so that a crash or an outage at
any point leaves a state a rerun resumes from.

The engine (`engine.run_purge`) is shared by every mail queue system and knows nothing about
Spark, Cassandra or S3: each system provides executors that verify, apply and check one action
kind each. See docs/retention.md, section "Purger", for the contract.
"""
