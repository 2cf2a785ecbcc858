"""Checking what a person answers, kind by kind (what an agent may ask is checked against the
kinds' definition, conversations.questions).

A bad answer is refused with ApplicationError ``invalid_answer`` (400) naming the problem, and
the question stays pending.
"""

from pathlib import Path

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import best_match

from conversations.files import UnsafePath, Within, open_root
from core.errors import ApplicationError

from .models import Selection

# The longest typed answer (a text, or a choice typed in).
MAX_TEXT_CHARS = 10_000


def invalid(message: str) -> ApplicationError:
    return ApplicationError("invalid_answer", message, status=400)


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
    """A path the question's folder holds, checked as the picker checks what it offers (one
    rule: conversations.files.list_folder offers only what this accepts); stored as where it
    really is, links resolved."""
    # Not stripped: a name may begin or end with a space (the picker offers it as it is).
    if not isinstance(answer, str) or not answer:
        raise invalid("answer: a path relative to the question's folder is required.")
    try:
        folder = open_root(Within(files_root, selection.root))
    except UnsafePath as exc:
        raise invalid(f"answer: the question's folder can no longer be used: {exc}") from None
    except (FileNotFoundError, NotADirectoryError):
        raise invalid("answer: the question's folder is no longer there.") from None
    try:
        # A named pipe or a socket is refused unopened; a file or a folder must be readable
        # (the picker offers nothing else).
        found = folder.inspect(answer, readable=True)
    except UnsafePath as exc:
        raise invalid(f"answer: {exc}") from None
    finally:
        folder.close()
    if found is None:
        raise invalid(f"answer: there is no '{answer}' in the question's folder.")
    if selection.mode == Selection.Mode.FILE and found.kind != "file":
        raise invalid(f"answer: '{answer}' is a folder; this question asks for a file.")
    if selection.mode == Selection.Mode.FOLDER and found.kind != "folder":
        raise invalid(f"answer: '{answer}' is a file; this question asks for a folder.")
    return found.path or "."


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
