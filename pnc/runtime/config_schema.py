"""Config checks shared by both studies' workflows (their ``common.smk`` files, through
``workflow/rules/shared.smk``): :func:`schema_problems` turns every JSON-schema violation of a
config into one line naming the key path, the offending value and what is allowed;
:func:`integer_seeds` reads ``seeds`` given on the command line (``snakemake --config
seeds=[0,1]`` passes the entries as strings) as integers. Study-neutral: the checks across keys
of each study are its own (:mod:`pnc.studies.mujoco.config_check`, ``workflow/rules/cifar/common.smk``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_BOUNDS = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
_INTEGER = re.compile(r"^[+-]?\d+$")


def key_path(parts) -> str:
    """``methods.pnc.grid.sigma[1]`` from a jsonschema error path."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def describe(error) -> str:
    """One line for one ``jsonschema`` violation: the key path, the offending value, what is
    allowed."""
    path = key_path(error.absolute_path)
    kind, bound, value = error.validator, error.validator_value, error.instance
    if "propertyNames" in error.relative_schema_path and kind == "enum":
        return f"{path}: unknown key {value!r}; allowed: {', '.join(map(str, bound))}"
    if kind == "required":
        missing = [key for key in bound if key not in value]
        return f"{path}: missing required key(s) {', '.join(missing)}"
    if kind == "additionalProperties" and bound is False:
        allowed = list(error.schema.get("properties", {}))
        unknown = [key for key in value if key not in allowed]
        unknown, allowed = ", ".join(map(str, unknown)), ", ".join(allowed)
        return f"{path}: unknown key(s) {unknown}; allowed: {allowed}"
    if kind == "enum":
        return f"{path} = {_short(value)}: not one of {', '.join(map(str, bound))}"
    if kind == "type":
        return f"{path} = {_short(value)}: must be of type {bound}"
    if kind in _BOUNDS:
        return f"{path} = {_short(value)}: must be {_BOUNDS[kind]} {bound}"
    if kind in ("minItems", "minProperties"):
        return f"{path} = {_short(value)}: needs at least {bound} entr(y/ies)"
    if kind == "uniqueItems":
        return f"{path} = {_short(value)}: entries must be distinct"
    return f"{path} = {_short(value)}: {_short(error.message, 160)}"


def schema_problems(data: Mapping, schema: Mapping) -> list[str]:
    """Every violation of ``schema`` by ``data``, one distinct line each (:func:`describe`),
    sorted by key path; empty when ``data`` is valid."""
    import jsonschema

    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    return list(dict.fromkeys(describe(e) for e in errors))


def integer_seeds(config: dict) -> None:
    """Read string entries of ``config["seeds"]`` that spell an integer as integers, in place.

    ``snakemake --config seeds=[0,1]`` hands the list's entries over as strings; anything else
    (``"a"``, ``1.5``) is left for the schema to reject.
    """
    seeds = config.get("seeds")
    if isinstance(seeds, list):
        config["seeds"] = [
            int(s) if isinstance(s, str) and _INTEGER.match(s.strip()) else s for s in seeds
        ]
