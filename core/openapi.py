"""The OpenAPI schema as client generators and linters read it: operations described only by what
their views say to clients (never a view class's docstring, written for Parley's developers), and
OpenAPI 3.0's `nullable` only beside a `type`, where the specification gives it a meaning; and
the API key sent as a bearer token, a security scheme of its own."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema

NULL = {"$ref": "#/components/schemas/NullEnum"}


class ClientSchema(AutoSchema):
    """drf-spectacular's schema, without descriptions taken from docstrings: an operation's
    description is the one its ``extend_schema`` gives."""

    def get_description(self) -> str:
        return ""


def null_beside_type(result, generator, request, public):
    """A postprocessing hook: every schema that says `nullable` without a `type` says it in a way
    OpenAPI 3.0 defines. A nullable reference (`allOf: [ref]`) becomes `oneOf: [ref, NullEnum]`; a
    `oneOf` that has `NullEnum` already drops the flag; a schema with no type (any JSON value, null
    among them) drops it too."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    used = [False]

    def fix(node):
        if isinstance(node, list):
            for item in node:
                fix(item)
            return
        if not isinstance(node, dict):
            return
        for value in node.values():
            fix(value)
        if not node.get("nullable") or "type" in node:
            return
        del node["nullable"]
        if len(node.get("allOf", [])) == 1:
            node["oneOf"] = [node.pop("allOf")[0], NULL]
        elif "oneOf" in node and NULL not in node["oneOf"]:
            node["oneOf"].append(NULL)
        used[0] = used[0] or NULL in node.get("oneOf", [])

    fix(result)
    if used[0]:
        schemas.setdefault("NullEnum", {"enum": [None]})
    return result


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """The API key sent as ``Authorization: Bearer <key>`` (core.lockout), beside ``Token``."""

    target_class = "core.lockout.BearerTokenAuthentication"
    name = "bearerAuth"
    priority = 1  # over drf-spectacular's own scheme for DRF's TokenAuthentication and kin

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "An API token (prl_…)."}
