"""The run history: every audit and validation can append its figures to a history, and rules
over that history say when a store is getting worse (docs/history.md).

- `schema`: the history's columns, its format version and its layout on storage;
- `collect`: a run's figures: what every system has (findings and bytes per check and
  severity, personal-data objects, checks not run, expectation results) next to the system's
  own (`spec.System.metrics`);
- `store`: appending a run atomically (a local directory, or any URL Spark writes) and reading
  the history back, in Spark or pandas;
- `rules`: alert rules as data (TOML), `default_rules.toml` the bundled set;
- `alerts`: the rules evaluated on Spark over every run of every series.

The history is a flow (docs/architecture.md): the runner appends to it, the API and the command
line read it; a system only measures its frames (`metrics.py`), never knows of the history.
"""
