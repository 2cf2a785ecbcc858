"""What an agent may ask, defined once: each question kind with its fields, their limits and
defaults, and what is derived from it: the checks a question passes before it is asked
(``clean_question``, behind ``ctx.ask``), the JSON schemas of the model's ``ask_*`` tools and of
MCP's ``ask`` tool, and (in selection.apis) the OpenAPI components of a question's fields.

A malformed question is the agent's bug: ``clean_question`` raises ValueError, which fails its
turn (or, over MCP, goes back to the caller as the tool's error).
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from core.ids import new_id

from .files import MAX_PATH_CHARS, UnsafePath, look

MAX_PROMPT_CHARS = 4000
MAX_OPTIONS = 100
MAX_LABEL_CHARS = 200
MAX_FORM_FIELDS = 30
# A week: long enough for a question asked as an MCP task, answered when people are back.
MAX_TIMEOUT_SECONDS = 7 * 24 * 3600
# What a path question may ask for, and how people see it named.
MODES = {"file": "File", "folder": "Folder", "any": "File or folder"}
# What a form's field may be (the flat subset MCP elicitation allows).
FORM_TYPES = ("string", "number", "integer", "boolean")
STRING_FORMATS = ("email", "uri", "date", "date-time")
FORM_FIELD_KEYS = (
    *("type", "title", "description", "default", "minLength", "maxLength"),
    *("format", "minimum", "maximum", "enum", "enumNames"),
)


def new_selection_id() -> str:
    """A question's public id, e.g. ``s_9f2c4e1a7b3d5c60``: made before it is stored, so that
    the turn waits for its answer from the moment it can come."""
    return new_id("s")


@dataclass(frozen=True)
class Field:
    """One field of a question: the JSON schema of its value (its type and limits), what it
    means, and what it is when not given."""

    name: str
    schema: dict
    description: str
    default: Any = None
    required: bool = False

    def json_schema(self) -> dict:
        extra = {} if self.default is None else {"default": self.default}
        return {**self.schema, "description": self.description, **extra}


@dataclass(frozen=True)
class Kind:
    """A question kind: its name, how people see it named, what asking it does and what its
    answer is (for models and outside agents), and its own fields."""

    name: str
    label: str
    asks: str
    answer: str
    fields: tuple[Field, ...] = ()


OPTION = {
    "type": "object",
    "properties": {
        "label": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_LABEL_CHARS,
            "description": "What people see.",
        },
        "value": {
            "type": "string",
            "minLength": 1,
            "description": "What the answer gives back (the label if omitted).",
        },
        "description": {"type": "string", "description": "A line of detail under the label."},
    },
    "required": ["label"],
    "additionalProperties": False,
}

PROMPT = Field(
    "prompt",
    {"type": "string", "minLength": 1, "maxLength": MAX_PROMPT_CHARS},
    "What to ask, as people will read it.",
    required=True,
)
# Who and how long: for every kind.
COMMON = (
    Field(
        "addressee",
        {"type": "string", "minLength": 1},
        "Username of the one person who should answer (or an owner); else anyone who may act.",
    ),
    Field(
        "timeout",
        {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_SECONDS},
        "Seconds before the question expires (default: Parley's setting).",
    ),
    Field(
        "escalate",
        {"type": "boolean"},
        "Call on the workspace's owners if nobody answers near the end of its time (default: "
        "Parley's setting).",
    ),
)

KINDS = {
    kind.name: kind
    for kind in (
        Kind(
            "path",
            "Pick a file or folder",
            "Ask the team to pick a file or folder of the workspace.",
            "its path, relative to the root",
            (
                Field(
                    "mode",
                    {"type": "string", "enum": list(MODES)},
                    "What may be picked: a file, a folder, or any.",
                    default="file",
                ),
                Field(
                    "root",
                    {"type": "string", "maxLength": MAX_PATH_CHARS},
                    "Only inside this folder of the workspace ('' for its root).",
                    default="",
                ),
            ),
        ),
        Kind(
            "choice",
            "Choose among options",
            "Ask the team to choose among options.",
            "the chosen option's value (a list of values with multiple; any text with "
            "allow_freeform)",
            (
                Field(
                    "options",
                    {"type": "array", "items": OPTION, "minItems": 1, "maxItems": MAX_OPTIONS},
                    "The options, each a label (and a value, the label if omitted).",
                    required=True,
                ),
                Field("multiple", {"type": "boolean"}, "Several may be chosen.", default=False),
                Field(
                    "allow_freeform",
                    {"type": "boolean"},
                    "People may type an answer of their own.",
                    default=False,
                ),
                Field(
                    "min_choices",
                    {"type": "integer", "minimum": 0},
                    "With multiple: the fewest to choose (default 1).",
                ),
                Field(
                    "max_choices",
                    {"type": "integer", "minimum": 1},
                    "With multiple: the most to choose (default all).",
                ),
            ),
        ),
        Kind("text", "Type an answer", "Ask the team to type an answer.", "the text"),
        Kind("confirm", "Confirm", "Ask the team yes or no.", "true or false"),
        Kind(
            "form",
            "Fill a form",
            "Ask the team to fill a small form.",
            "the fields' values, as an object",
            (
                Field(
                    "schema",
                    {"type": "object"},
                    "A flat JSON schema: an object of string, number, integer, boolean or enum "
                    f"fields (at most {MAX_FORM_FIELDS}).",
                    required=True,
                ),
            ),
        ),
    )
}

# Every field any kind has, by name (a kind's own, then the common ones).
FIELDS = {field.name: field for kind in KINDS.values() for field in kind.fields} | {
    field.name: field for field in COMMON
}


# Derived schemas ---------------------------------------------------------------------------


def _object(fields, required: list[str], **properties) -> dict:
    return {
        "type": "object",
        "properties": {**properties, **{field.name: field.json_schema() for field in fields}},
        "required": required,
        "additionalProperties": False,
    }


def tool_schema(kind: Kind) -> dict:
    """The arguments of the model's tool that asks a question of this kind."""
    fields = (PROMPT, *kind.fields, *COMMON)
    return _object(fields, [field.name for field in fields if field.required])


def tool_description(kind: Kind) -> str:
    return f"{kind.asks} The answer is {kind.answer}."


def ask_schema(**extra_properties) -> dict:
    """The arguments of one tool that asks any kind (MCP's ``ask``): the kind, the prompt, every
    kind's fields (a field of another kind than the one asked is ignored), the common ones, and
    ``extra_properties``."""
    kind = {"type": "string", "enum": list(KINDS), "description": "The kind of question."}
    fields = (PROMPT, *FIELDS.values())
    return _object(fields, ["kind", PROMPT.name], kind=kind, **extra_properties)


def ask_description() -> str:
    """What MCP's ``ask`` does, kind by kind."""
    kinds = "; ".join(
        f"'{kind.name}': {kind.label.lower()}"
        + (f" ({', '.join(field.name for field in kind.fields)})" if kind.fields else "")
        + f", answered with {kind.answer}"
        for kind in KINDS.values()
    )
    return (
        "Ask the people on your team something and wait for the answer. Kinds: "
        f"{kinds}. The result's status is answered (see answer), dismissed, declined, expired "
        "or cancelled."
    )


# The checks ---------------------------------------------------------------------------------

_VALIDATORS = {name: Draft202012Validator(field.schema) for name, field in FIELDS.items()}


def clean_question(*, kind: str, prompt, files_root: Path, **given) -> dict:
    """The fields of a Selection for this question: those of its kind, checked against the
    definition, defaults filled in (an option given as a string is its label and value; an
    option's value defaults to its label). The common fields (addressee, timeout, escalate) are
    checked if given, not returned; fields of another kind are ignored. Raises ValueError
    if it is malformed: an unknown kind or field, a value out of its limits, options or a root
    or a form's schema that cannot be used."""
    if kind not in KINDS:
        raise ValueError(f"Unknown question kind {kind!r}; use one of {list(KINDS)}.")
    if unknown := sorted(set(given) - set(FIELDS) - {PROMPT.name}):
        raise ValueError(f"A question has no field {unknown[0]!r}; its fields: {list(FIELDS)}.")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("A question needs a prompt.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(f"A question's prompt may be at most {MAX_PROMPT_CHARS} characters.")
    for field in COMMON:
        if given.get(field.name) is not None:
            _check(field, given[field.name])
    spec = KINDS[kind]
    values = {}
    for field in spec.fields:
        value = given.get(field.name)
        if field.name == "options" and isinstance(value, list):
            value = [{"label": o, "value": o} if isinstance(o, str) else o for o in value]
        if value is None:
            value = field.default
        if value is not None:
            _check(field, value)
        values[field.name] = value
    fields = {"kind": kind, "prompt": prompt.strip()}
    if kind == "choice":
        fields.update(_clean_choice(**values))
    elif kind == "path":
        fields.update(_clean_path(values["mode"], values["root"], files_root))
    elif kind == "form":
        fields["schema"] = clean_form_schema(values["schema"])
    return fields


def _check(field: Field, value) -> None:
    error = best_match(_VALIDATORS[field.name].iter_errors(value))
    if error is None:
        return
    if field.name == "options":
        if not isinstance(value, list) or not 0 < len(value) <= MAX_OPTIONS:
            raise ValueError(f"A choice needs 1 to {MAX_OPTIONS} options.")
        raise ValueError(
            f"Each option needs a label, and labels and values are strings: {error.message}."
        )
    if field.name == "mode":
        raise ValueError(f"A path question's mode is one of {list(MODES)}.")
    where = ".".join(str(part) for part in error.absolute_path)
    raise ValueError(f"{field.name}{'.' + where if where else ''}: {error.message}.")


def _clean_choice(*, options, multiple, allow_freeform, min_choices, max_choices) -> dict:
    if options is None:
        raise ValueError(f"A choice needs 1 to {MAX_OPTIONS} options.")
    cleaned, values = [], set()
    for option in options:
        value = option.get("value", option["label"])
        if value in values:
            raise ValueError("Option values are unique.")
        values.add(value)
        entry = {"label": option["label"], "value": value}
        if option.get("description"):
            entry["description"] = option["description"]
        cleaned.append(entry)
    fields = {"options": cleaned, "multiple": multiple, "allow_freeform": allow_freeform}
    if multiple:
        low = 1 if min_choices is None else min_choices
        high = len(cleaned) if max_choices is None else max_choices
        if not 0 <= low <= high or (high > len(cleaned) and not allow_freeform):
            raise ValueError("min_choices and max_choices must fit the options.")
        fields.update(min_choices=low, max_choices=high)
    return fields


def _clean_path(mode: str, root: str, files_root: Path) -> dict:
    try:
        folder = look(files_root, root)
    except UnsafePath as exc:
        raise ValueError(f"The question's root is unsafe: {exc}") from None
    except FileNotFoundError:
        folder = None
    if folder is None or folder.kind != "folder":
        raise ValueError(f"The question's root {root!r} is not a folder of the workspace.")
    return {"mode": mode, "root": folder.path}


def clean_form_schema(schema) -> dict:
    """A flat object schema of string, number, integer, boolean and enum fields (as MCP
    elicitation allows). Raises ValueError otherwise."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError("A form's schema is an object schema.")
    properties = schema.get("properties")
    if not isinstance(properties, dict) or not 0 < len(properties) <= MAX_FORM_FIELDS:
        raise ValueError(f"A form has 1 to {MAX_FORM_FIELDS} fields.")
    for name, field in properties.items():
        if not isinstance(field, dict) or field.get("type") not in FORM_TYPES:
            raise ValueError(f"Form field {name!r} must be a string, number, integer or boolean.")
        if extra := set(field) - set(FORM_FIELD_KEYS):
            raise ValueError(f"Form field {name!r} has unsupported keys: {sorted(extra)}.")
        if "format" in field and field["format"] not in STRING_FORMATS:
            raise ValueError(f"Form field {name!r} has an unsupported format.")
        if "enum" in field and (field["type"] != "string" or not field["enum"]):
            raise ValueError(f"Form field {name!r}: an enum is a non-empty list of strings.")
    required = schema.get("required", [])
    if not isinstance(required, list) or not set(required) <= set(properties):
        raise ValueError("A form's required fields must be among its properties.")
    cleaned = {"type": "object", "properties": properties, "required": required}
    if "title" in schema:
        cleaned["title"] = str(schema["title"])
    try:
        Draft202012Validator.check_schema(cleaned)
    except SchemaError as exc:
        raise ValueError(f"The form's schema is invalid: {exc.message}") from None
    return cleaned
