"""mqforensics: forensic and retention toolkit for mail queues, on PySpark."""

__version__ = "0.1.0"
