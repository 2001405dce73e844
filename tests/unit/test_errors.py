import pytest

from mqforensics.errors import (
    AuthenticationFailed,
    InputError,
    explain,
    spark_read_failure,
    translated,
    typed,
)

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


# --- files Spark's readers cannot read (errors.spark_read_failure, typed, translated) ----------

# Spark 4.1's text for a part file whose footer is gone (a job's failure, as Py4J shows it).
FOOTER_FAILURE = (
    "An error occurred while calling o87.localCheckpoint.\n"
    ": org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 2.0 "
    "failed 1 times, most recent failure: Lost task 0.0 in stage 2.0 (TID 2) (127.0.0.1 "
    "executor driver): org.apache.spark.SparkException: [FAILED_READ_FILE.CANNOT_READ_FILE_FOOTER]"
    " Encountered error while reading file file:///data/snap/enqueuedmailsv4.parquet/"
    "part-00002.parquet. Could not read footer. Please ensure that the file is in either ORC or "
    "Parquet format. SQLSTATE: KD001\n\tat org.apache.spark.sql.errors.QueryExecutionErrors$"
    ".cannotReadFooterForFileError(QueryExecutionErrors.scala:1044)\n"
)


def test_a_file_spark_cannot_read_is_an_input_error_naming_it():
    assert explain(RuntimeError(FOOTER_FAILURE)) == (
        "InputError: /data/snap/enqueuedmailsv4.parquet/part-00002.parquet: cannot be read "
        "(not a Parquet file, or truncated: its footer cannot be read)"
    )


def test_the_reason_of_a_failure_without_a_hint_comes_from_its_java_causes():
    text = (
        "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file "
        "file:/a b/x.parquet. SQLSTATE: KD001\n\tat org.apache...\nCaused by: "
        "org.apache.parquet.io.ParquetDecodingException: Can not read value at 0 in block -1"
    )
    assert spark_read_failure(text) == "/a b/x.parquet: cannot be read (damaged Parquet data)"
    bare = "[FAILED_READ_FILE.NO_HINT] Encountered error while reading file s3a://b/k.parquet."
    assert spark_read_failure(bare) == (
        "s3a://b/k.parquet: cannot be read (damaged, or not in the format its name says)"
    )
    assert spark_read_failure("[CANNOT_PARSE_TIMESTAMP] something else") is None


def test_typed_gives_our_error_its_own_type_and_translated_raises_it_without_the_wrapper():
    error = typed(RuntimeError(FOOTER_FAILURE))
    assert isinstance(error, InputError)
    assert error.message.startswith("/data/snap/enqueuedmailsv4.parquet/part-00002.parquet: ")
    wrapped = RuntimeError("worker said:\n" + str(AuthenticationFailed(REFUSED)))
    assert isinstance(typed(wrapped), AuthenticationFailed)
    assert typed(ValueError("not ours")) is None
    with pytest.raises(InputError) as caught, translated():
        raise RuntimeError(FOOTER_FAILURE)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    with pytest.raises(ValueError), translated():
        raise ValueError("not ours: propagates as it is")
