"""`make lab` installs notebooks/lab/overrides.json as JupyterLab's settings overrides: each
setting it names must be one the installed extension declares (a misspelt plugin id or key is
silently ignored by JupyterLab, and saved notebooks would reopen as "model not found" again)."""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LABEXTENSIONS = Path(sys.prefix) / "share" / "jupyter" / "labextensions"


def test_every_override_is_a_setting_the_installed_extension_declares():
    overrides = json.loads((ROOT / "notebooks" / "lab" / "overrides.json").read_text())
    assert overrides["@jupyter-widgets/jupyterlab-manager:plugin"] == {"saveState": True}
    for plugin, values in overrides.items():
        package, _, name = plugin.partition(":")
        schema_file = LABEXTENSIONS / package / "schemas" / package / f"{name}.json"
        schema = json.loads(schema_file.read_text())
        for key, value in values.items():
            declared = schema["properties"][key]
            assert declared["type"] == "boolean" and isinstance(value, bool), (plugin, key)


def test_make_lab_installs_them_where_jupyterlab_reads_overrides():
    makefile = (ROOT / "Makefile").read_text()
    assert "LAB_SETTINGS := $(VENV)/share/jupyter/lab/settings" in makefile
    assert "cp notebooks/lab/overrides.json $(LAB_SETTINGS)/overrides.json" in makefile
