"""The generated settings reference names every section and field, and its environment variables work.

The page is generated from the settings models (scripts/settings_reference.py, an MkDocs hook), so it cannot
drift from them; these tests check that the generator misses nothing, including nested sections, and that each
environment variable it documents is the one load_settings reads.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import get_origin

import pytest
from pydantic import BaseModel

from drs_prom.config import Settings, load_settings
from drs_prom.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("settings_reference", ROOT / "scripts" / "settings_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()
PAGE = GEN.render()


def _all_sections(model: type[BaseModel] = Settings, prefix: str = "") -> list[tuple[str, type[BaseModel]]]:
    """Every section by walking the models independently of the generator."""
    out = []
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            out.append((prefix + name, field.annotation))
            out.extend(_all_sections(field.annotation, f"{prefix}{name}."))
    return out


def _section_text(dotted: str) -> str:
    """The page's text from this section's heading to the next heading."""
    start = PAGE.index(f"## `{dotted}`\n")
    end = PAGE.find("\n## ", start + 1)
    return PAGE[start : end if end != -1 else len(PAGE)]


def test_every_section_has_its_own_table() -> None:
    sections = _all_sections()
    assert {s for s, _ in sections} >= {"prometheus", "scheduler", "rollout", "rollout.guardrails", "serving"}
    for dotted, _ in sections:
        assert f"## `{dotted}`\n" in PAGE, f"section {dotted} missing from the settings reference"


@pytest.mark.parametrize(("dotted", "model"), _all_sections(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_field_is_listed_in_its_section(dotted: str, model: type[BaseModel]) -> None:
    text = _section_text(dotted)
    for name, field in model.model_fields.items():
        assert f"| `{name}` |" in text, f"{dotted}.{name} missing from the settings reference"
        if field.description:
            assert " ".join(field.description.split()).replace("|", "\\|") in text


def _env_cases() -> list[tuple[str, str, str]]:
    """(section, field, documented variable) for every field the page gives a variable, numeric or boolean."""
    cases = []
    for section, field in Settings.model_fields.items():
        model = field.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for name, sub in model.model_fields.items():
            env = GEN.env_var(section, name, sub.annotation)
            if env and sub.annotation in (int, float, bool):
                assert f"`{env}`" in _section_text(section)
                cases.append((section, name, env))
    return cases


@pytest.mark.parametrize(("section", "field", "env"), _env_cases())
def test_documented_environment_variable_reaches_its_field(
    section: str, field: str, env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A value no int, float or bool field accepts: the error must name this very field, which shows the
    # documented variable is the one load_settings maps onto it (a wrong name would be ignored silently).
    monkeypatch.setenv(env, "not-a-value")
    with pytest.raises(ConfigError, match=rf"invalid config: {section}\.{field}:"):
        load_settings()


def test_list_and_nested_fields_are_file_only() -> None:
    guardrails = _section_text("rollout.guardrails")
    assert "file only" in guardrails and "DRS_PROM_" not in guardrails
    rules_row = next(line for line in _section_text("rollout").splitlines() if line.startswith("| `canary_namespaces`"))
    assert get_origin(Settings.model_fields["rollout"].annotation.model_fields["canary_namespaces"].annotation) is list
    assert rules_row.endswith("file only |")
