"""Postfix queues (issue 31, in progress): the queue-file record and envelope decoders. The system
is not in the registry yet: no command reads Postfix queues so far."""
