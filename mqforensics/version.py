"""The toolkit's version, recorded in every manifest and report."""

__version__ = "0.1.0"
