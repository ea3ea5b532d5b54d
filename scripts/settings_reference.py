"""The settings reference page, generated from the pydantic models so it cannot drift from them.

``render()`` walks ``drs_prom.config.Settings``: one table per section (nested sections such as
``rollout.guardrails`` get their own), each field with its type, default, description and the
environment variable ``load_settings`` maps onto it. The MkDocs hook ``on_files`` (mkdocs.yml:
``hooks:``) adds the result to the site as ``settings.md`` at build time; nothing is written
into docs/. ``python scripts/settings_reference.py`` prints the same Markdown.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, get_args, get_origin

# The site documents this checkout's settings, not those of whatever drs_prom an interpreter finds first.
_ROOT = Path(__file__).resolve().parents[1]
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from pydantic import BaseModel, SecretStr  # noqa: E402
from pydantic.fields import FieldInfo  # noqa: E402

from drs_prom.config import ENV_PREFIX, Settings  # noqa: E402

PAGE = "settings.md"

_INTRO = """# Settings reference

This page is generated from the settings models in `drs_prom/config.py` each time the site is built,
so it lists exactly the fields this version accepts.

Settings come from one YAML file (`--config`); every field is optional and every default works on the
embedded simulator, so an empty file (or none) is a valid configuration. An environment variable
`DRS_PROM_<SECTION>_<FIELD>` overrides the file for a field of a top-level section (for example
`DRS_PROM_PROMETHEUS_URL`); fields of nested sections and list fields are set in the file only.
Command-line flags override both. Values are validated at load: an unknown field, a value out of range
or a contradiction (for example a bearer token and basic auth together) stops the command with one
line naming the field.

Sections: {sections}.
"""


def _type_name(annotation: Any) -> str:
    """A short, readable type: ``float``, ``list[str]``, ``dict[str, str]``, ``secret``."""
    if annotation is SecretStr:
        return "secret string"
    origin = get_origin(annotation)
    if origin is None:
        return getattr(annotation, "__name__", str(annotation))
    args = ", ".join(_type_name(a) for a in get_args(annotation))
    return f"{getattr(origin, '__name__', str(origin))}[{args}]"


def _default(field: FieldInfo) -> str:
    """The default as it would be written in the YAML file."""
    value = field.get_default(call_default_factory=True)
    if isinstance(value, SecretStr):
        return '`""`' if not value.get_secret_value() else "(set)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, list | tuple):
        return "`[" + ", ".join(str(v) for v in value) + "]`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    return f"`{value}`"


def _constraints(field: FieldInfo) -> str:
    """Bounds and patterns pydantic enforces, as text (``> 0``, ``0 ≤ x ≤ 1``, one of ...)."""
    parts = []
    for meta in field.metadata:
        for attr, sign in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
            bound = getattr(meta, attr, None)
            if bound is not None:
                parts.append(f"{sign} {bound}")
        pattern = getattr(meta, "pattern", None)
        if pattern and pattern.startswith("^(") and pattern.endswith(")$"):
            parts.append("one of " + ", ".join(f"`{p}`" for p in pattern[2:-2].split("|")))
    return "; ".join(parts)


def _cell(text: str) -> str:
    """Plain text for a table cell (a pipe would end the cell; inside a code span it does not)."""
    return text.replace("|", "\\|").replace("\n", " ")


def env_var(section: str, field: str, annotation: Any) -> str | None:
    """The variable ``load_settings`` maps onto ``section.field``, or None where none can set it.

    It splits ``DRS_PROM_<SECTION>_<FIELD>`` at the first underscore after the prefix, so a section
    with an underscore in its name has none, and a list cannot be written as one variable's text.
    """
    if "_" in section or get_origin(annotation) is list:
        return None
    return f"{ENV_PREFIX}{section.upper()}_{field.upper()}"


def sections(model: type[BaseModel] = Settings, prefix: str = "") -> list[tuple[str, type[BaseModel]]]:
    """Every section, nested ones included, as (dotted name, model), in declaration order."""
    found: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            dotted = f"{prefix}{name}"
            found.append((dotted, annotation))
            found.extend(sections(annotation, dotted + "."))
    return found


def _section_table(dotted: str, model: type[BaseModel]) -> list[str]:
    top_level = "." not in dotted
    lines = [f"## `{dotted}`", ""]
    doc = (model.__doc__ or "").strip()
    if doc:
        lines += [" ".join(doc.split("\n\n")[0].split()), ""]
    lines += ["| field | type | default | description | environment variable |", "| --- | --- | --- | --- | --- |"]
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            lines.append(f"| `{name}` | section | | see [`{dotted}.{name}`](#{dotted.replace('.', '')}{name}) | |")
            continue
        description = field.description or ""
        bounds = _constraints(field)
        if bounds:
            description = f"{description} ({bounds})" if description else bounds
        env = env_var(dotted, name, annotation) if top_level else None
        lines.append(
            f"| `{name}` | {_cell(_type_name(annotation))} | {_default(field)} | {_cell(description)} | "
            f"{f'`{env}`' if env else 'file only'} |"
        )
    return [*lines, ""]


def render() -> str:
    """The whole reference page as Markdown."""
    found = sections()
    names = ", ".join(f"[`{d}`](#{d.replace('.', '')})" for d, _ in found)
    lines = [_INTRO.format(sections=names)]
    for dotted, model in found:
        lines += _section_table(dotted, model)
    return "\n".join(lines)


def on_files(files: Any, config: Any) -> Any:
    """MkDocs hook: add the generated page to the site's files (before the nav is built)."""
    from mkdocs.structure.files import File

    files.append(File.generated(config, PAGE, content=render()))
    return files


if __name__ == "__main__":
    print(render())
