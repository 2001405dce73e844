"""Cyrus IMAP `mailboxes.db`: read-only file parsers, dump parsers, key/value and RACL logic."""
