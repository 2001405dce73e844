from mqforensics.errors import AuthenticationFailed, InputError, explain

REFUSED = "Cassandra at 10.0.0.1:9042 refused the credentials of user 'u'"


def test_explain_finds_our_error_through_a_cause_chain():
    try:
        try:
            raise InputError("segment q/0001 truncated at offset 4096")
        except InputError as inner:
            raise RuntimeError("wrapper") from inner
    except RuntimeError as outer:
        assert explain(outer) == "InputError: segment q/0001 truncated at offset 4096"


def test_explain_recovers_the_line_from_a_spark_worker_traceback_text():
    # What the driver sees when a Python data source raises in a worker: only text survives.
    text = (
        "An exception was thrown from the Python worker.\nTraceback (most recent call last):\n"
        '  File "x.py", line 3, in read\n'
        + str(AuthenticationFailed(REFUSED))
        + "\n\tat org.apache.spark..."
    )
    assert explain(Exception(text)) == f"AuthenticationFailed: {REFUSED}"


def test_explain_returns_none_for_foreign_errors():
    assert explain(ValueError("nothing of ours")) is None
