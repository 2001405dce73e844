"""`variables_set`: variables set (or unset) inside, each back as it was after, failed or not."""

import os

import pytest

from mqforensics.environment import variables_set


def test_variables_are_set_inside_and_put_back_after_even_on_error(monkeypatch):
    monkeypatch.setenv("MQF_T_KEPT", "before")
    monkeypatch.setenv("MQF_T_UNSET", "there")
    monkeypatch.delenv("MQF_T_NEW", raising=False)
    changes = {"MQF_T_KEPT": "inside", "MQF_T_UNSET": None, "MQF_T_NEW": "new"}
    with pytest.raises(RuntimeError), variables_set(changes):
        assert os.environ["MQF_T_KEPT"] == "inside"
        assert "MQF_T_UNSET" not in os.environ
        assert os.environ["MQF_T_NEW"] == "new"
        raise RuntimeError
    assert os.environ["MQF_T_KEPT"] == "before"
    assert os.environ["MQF_T_UNSET"] == "there"
    assert "MQF_T_NEW" not in os.environ
