"""The admission API's OpenAPI document, as this process serves it.

The packaged ``openapi.json`` describes the routes, the answers and the errors. What a client
may admit depends on the stages the process runs, so the document served names them: the
admission body is one schema per job type marked ``clients_may_admit``, each with its type as a
constant and its payload as the stage's model describes it (a stage without a model takes any
JSON object). A client, or a fuzzer, reading the document learns exactly what is accepted.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import Any

from .stage import Stage, known_types

# Where a payload model's own definitions go among the document's components.
PAYLOAD_DEFINITIONS = "Payload"
# Text fairqueue can store: no NUL character (the packaged document's StorableValue says the same).
NO_NUL = "^[^\\u0000]*$"


@cache
def packaged_document() -> dict[str, Any]:
    """``openapi.json`` as shipped: every route, answer and error."""
    text = (resources.files("fairqueue") / "openapi.json").read_text(encoding="utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def admittable_stages() -> list[Stage]:
    """The stages of this process that clients may admit, by name."""
    return sorted(
        (stage for stage in known_types().values() if stage.clients_may_admit),
        key=lambda stage: stage.name,
    )


def openapi_document(stages: list[Stage] | None = None) -> dict[str, Any]:
    """The packaged document, with the admission body written out for ``stages`` (by default
    the process's admittable stages)."""
    document = copy.deepcopy(packaged_document())
    chosen = admittable_stages() if stages is None else stages
    if not chosen:
        return document
    schemas: dict[str, Any] = document["components"]["schemas"]
    generic = schemas["AdmitRequest"]
    variants = []
    for stage in chosen:
        variant = copy.deepcopy(generic)
        variant["properties"]["type"] = {
            "const": stage.name,
            "description": f"The job type {stage.name}.",
        }
        variant["properties"]["payload"] = _payload_schema(stage, schemas)
        variant.pop("description", None)
        variants.append(variant)
    schemas["AdmitRequest"] = {
        "description": generic.get("description", ""),
        "oneOf": variants,
    }
    return document


def _payload_schema(stage: Stage, schemas: dict[str, Any]) -> dict[str, Any]:
    """The payload as the stage's model describes it; its nested definitions join the
    document's components."""
    if stage.payload_model is None:
        return {
            "allOf": [{"$ref": "#/components/schemas/StorableObject"}],
            "description": "Any JSON object fairqueue can store.",
        }
    schema = stage.payload_model.model_json_schema(
        by_alias=True, ref_template=f"#/components/schemas/{PAYLOAD_DEFINITIONS}{{model}}"
    )
    for name, definition in schema.pop("$defs", {}).items():
        schemas[f"{PAYLOAD_DEFINITIONS}{name}"] = storable(definition)
    return storable(schema)


def storable(schema: dict[str, Any]) -> dict[str, Any]:
    """A model's JSON Schema narrowed to what fairqueue can store: every string, and every key
    of an object that allows more keys, without a NUL (fairqueue.inputs refuses them)."""
    stack: list[Any] = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        kinds = node.get("type")
        if kinds == "string" or (isinstance(kinds, list) and "string" in kinds):
            if "pattern" in node:
                node.setdefault("allOf", []).append({"pattern": NO_NUL})
            else:
                node["pattern"] = NO_NUL
        if node.get("additionalProperties") not in (None, False):
            node.setdefault("propertyNames", {"pattern": NO_NUL})
        stack.extend(v for k, v in node.items() if k not in {"pattern", "propertyNames"})
    return schema
