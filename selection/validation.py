"""Checking what an agent asks, and what a person answers, kind by kind.

A malformed question is the agent's bug: it raises ValueError and fails the turn. A bad answer
is refused with ApplicationError ``invalid_answer`` (400) naming the problem, and the question
stays pending.
"""

from pathlib import Path

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import SchemaError, best_match

from conversations.files import (
    UnsafePath,
    check_readable,
    kind_of,
    relative_path,
    resolve_inside,
)
from core.errors import ApplicationError

from .models import Selection

MAX_PROMPT_CHARS = 4000
MAX_OPTIONS = 100
MAX_TEXT_CHARS = 10_000
MAX_FORM_FIELDS = 30
FORM_TYPES = {"string", "number", "integer", "boolean"}
STRING_FORMATS = {"email", "uri", "date", "date-time"}
FIELD_KEYS = {
    "type",
    "title",
    "description",
    "default",
    "minLength",
    "maxLength",
    "format",
    "minimum",
    "maximum",
    "enum",
    "enumNames",
}


def invalid(message: str) -> ApplicationError:
    return ApplicationError("invalid_answer", message, status=400)


# What an agent may ask -------------------------------------------------------------------


def clean_question(
    *,
    kind: str,
    prompt: str,
    files_root: Path,
    options=None,
    multiple: bool = False,
    allow_freeform: bool = False,
    min_choices: int | None = None,
    max_choices: int | None = None,
    mode: str | None = None,
    root: str = "",
    schema: dict | None = None,
) -> dict:
    """The fields of a Selection for this question. Raises ValueError if it is malformed."""
    if kind not in Selection.Kind.values:
        raise ValueError(f"Unknown question kind {kind!r}; use one of {Selection.Kind.values}.")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("A question needs a prompt.")
    fields = {"kind": kind, "prompt": prompt.strip()[:MAX_PROMPT_CHARS]}
    if kind == Selection.Kind.CHOICE:
        fields.update(_clean_choice(options, multiple, allow_freeform, min_choices, max_choices))
    elif kind == Selection.Kind.PATH:
        fields.update(_clean_path_question(mode, root, files_root))
    elif kind == Selection.Kind.FORM:
        fields["schema"] = clean_form_schema(schema)
    return fields


def _clean_choice(options, multiple, allow_freeform, min_choices, max_choices) -> dict:
    if not isinstance(options, list) or not options or len(options) > MAX_OPTIONS:
        raise ValueError(f"A choice needs 1 to {MAX_OPTIONS} options.")
    cleaned, values = [], set()
    for option in options:
        if isinstance(option, str):
            option = {"label": option, "value": option}
        if not isinstance(option, dict) or not {"label", "value"} <= option.keys():
            raise ValueError("Each option needs a label and a value.")
        label, value = option["label"], option["value"]
        if not isinstance(label, str) or not isinstance(value, str) or value in values:
            raise ValueError("Option labels and values are strings, and values are unique.")
        values.add(value)
        entry = {"label": label, "value": value}
        if option.get("description"):
            entry["description"] = str(option["description"])
        cleaned.append(entry)
    fields = {
        "options": cleaned,
        "multiple": bool(multiple),
        "allow_freeform": bool(allow_freeform),
    }
    if multiple:
        low = 1 if min_choices is None else min_choices
        high = len(cleaned) if max_choices is None else max_choices
        if not 0 <= low <= high or (high > len(cleaned) and not allow_freeform):
            raise ValueError("min_choices and max_choices must fit the options.")
        fields.update(min_choices=low, max_choices=high)
    return fields


def _clean_path_question(mode, root, files_root: Path) -> dict:
    mode = mode or Selection.Mode.FILE
    if mode not in Selection.Mode.values:
        raise ValueError(f"A path question's mode is one of {Selection.Mode.values}.")
    try:
        folder = resolve_inside(files_root, root or "")
        kind = kind_of(folder, root or "")
    except UnsafePath as exc:
        raise ValueError(f"The question's root is unsafe: {exc}") from None
    if kind != "folder":
        raise ValueError(f"The question's root {root!r} is not a folder of the workspace.")
    return {"mode": mode, "root": relative_path(files_root, folder)}


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
        if extra := set(field) - FIELD_KEYS:
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


# What a person may answer -----------------------------------------------------------------


def clean_answer(selection: Selection, answer, files_root: Path):
    """The answer as stored and given to the agent. Raises ApplicationError invalid_answer."""
    cleaners = {
        Selection.Kind.PATH: _clean_path_answer,
        Selection.Kind.CHOICE: _clean_choice_answer,
        Selection.Kind.TEXT: _clean_text_answer,
        Selection.Kind.CONFIRM: _clean_confirm_answer,
        Selection.Kind.FORM: _clean_form_answer,
    }
    return cleaners[selection.kind](selection, answer, files_root)


def _clean_path_answer(selection, answer, files_root):
    if not isinstance(answer, str) or not answer.strip():
        raise invalid("answer: a path relative to the question's folder is required.")
    try:
        root = resolve_inside(files_root, selection.root)
    except UnsafePath as exc:
        raise invalid(f"answer: the question's folder can no longer be used: {exc}") from None
    try:
        target = resolve_inside(root, answer)
        # A named pipe or a socket is refused unopened; a file or a folder must be readable
        # (the picker offers nothing else).
        kind = kind_of(target, answer.strip())
        if kind is not None:
            check_readable(target, kind, answer.strip())
    except UnsafePath as exc:
        raise invalid(f"answer: {exc}") from None
    except FileNotFoundError:
        kind = None
    if kind is None:
        raise invalid(f"answer: there is no '{answer}' in the question's folder.")
    if selection.mode == Selection.Mode.FILE and kind != "file":
        raise invalid(f"answer: '{answer}' is a folder; this question asks for a file.")
    if selection.mode == Selection.Mode.FOLDER and kind != "folder":
        raise invalid(f"answer: '{answer}' is a file; this question asks for a folder.")
    return relative_path(root, target) or "."


def _clean_choice_answer(selection, answer, files_root):
    values = [option["value"] for option in selection.options]
    if not selection.multiple:
        if not isinstance(answer, str):
            raise invalid("answer: one option's value (a string) is required.")
        if answer not in values and not (selection.allow_freeform and answer.strip()):
            raise invalid(f"answer: '{answer}' is not one of the options: {', '.join(values)}.")
        return answer if answer in values else answer.strip()[:MAX_TEXT_CHARS]
    if not isinstance(answer, list) or not all(isinstance(item, str) for item in answer):
        raise invalid("answer: a list of option values is required.")
    if len(set(answer)) != len(answer):
        raise invalid("answer: each option may be chosen once.")
    unknown = [item for item in answer if item not in values]
    if unknown and not selection.allow_freeform:
        raise invalid(f"answer: not among the options: {', '.join(unknown)}.")
    if any(not item.strip() for item in answer):
        raise invalid("answer: a choice may not be blank.")
    low, high = selection.min_choices or 0, selection.max_choices
    if not low <= len(answer) <= (high if high is not None else len(answer)):
        raise invalid(f"answer: choose from {low} to {high} options.")
    return answer


def _clean_text_answer(selection, answer, files_root):
    if not isinstance(answer, str) or not answer.strip():
        raise invalid("answer: some text is required.")
    if len(answer) > MAX_TEXT_CHARS:
        raise invalid(f"answer: at most {MAX_TEXT_CHARS} characters.")
    return answer.strip()


def _clean_confirm_answer(selection, answer, files_root):
    if not isinstance(answer, bool):
        raise invalid("answer: true or false is required.")
    return answer


def _clean_form_answer(selection, answer, files_root):
    if not isinstance(answer, dict):
        raise invalid("answer: an object with the form's fields is required.")
    schema = {**selection.schema, "additionalProperties": False}
    validator = Draft202012Validator(schema, format_checker=FormatChecker())
    error = best_match(validator.iter_errors(answer))
    if error is not None:
        where = ".".join(str(part) for part in error.absolute_path)
        raise invalid(f"answer{'.' + where if where else ''}: {error.message}")
    return answer
