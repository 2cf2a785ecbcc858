"""The REST API for questions agents ask: list, read, answer, and browse a path's folder."""

from django.utils.text import Truncator
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from conversations.access import conversation_access, membership_of
from conversations.files import UnsafePath, Within, list_folder
from conversations.questions import FIELDS, KINDS, MAX_OPTIONS, OPTION, PROMPT
from core.api import PooledApiView, error_responses, field_for
from core.errors import ApplicationError, not_found
from core.lockout import api_token_id
from core.people import person

from . import selectors, services
from .access import selection_access
from .links import AnswerLink, link_scoped
from .models import Selection, Via

# How much of the input that led to a question its answer link's page quotes.
LINK_INPUT_CHARS = 500

# What answering or browsing a question may meet: bad input, not yours, unknown, settled, expired.
ERRORS = error_responses(400, 403, 404, 409, 410)


def _question_field(name: str) -> serializers.Field:
    """A question's field as the payload has it (null where its kind has none), its type and
    limits derived from the question kinds' definition (conversations.questions)."""
    field = FIELDS[name]
    return field_for(field.json_schema(), name=f"Question{name.title()}", allow_null=True)


class SelectionSerializer(serializers.Serializer):
    """A question (see the contract): the same shape as in ``selection.requested``."""

    id = serializers.CharField()
    conversation = serializers.CharField()
    turn = serializers.CharField()
    ordinal = serializers.IntegerField()
    kind = field_for({"type": "string", "enum": list(KINDS)}, name="QuestionKind")
    prompt = field_for(PROMPT.json_schema(), name="QuestionPrompt")
    # Every kind has its options: none but a choice's.
    options = serializers.ListField(
        child=field_for(OPTION, name="QuestionOption"), max_length=MAX_OPTIONS
    )
    multiple = field_for(FIELDS["multiple"].json_schema(), name="QuestionMultiple")
    allow_freeform = field_for(FIELDS["allow_freeform"].json_schema(), name="QuestionFreeform")
    min_choices = _question_field("min_choices")
    max_choices = _question_field("max_choices")
    mode = _question_field("mode")
    root = _question_field("root")
    schema = _question_field("schema")
    field_order = serializers.ListField(
        child=serializers.CharField(),
        allow_null=True,
        help_text="A form's field names in the order it defined them (the schema's object may "
        "not keep that order); null for other kinds",
    )
    addressee = serializers.DictField(allow_null=True)
    status = serializers.ChoiceField(choices=Selection.Status.choices)
    answer = serializers.JSONField(allow_null=True)
    answered_by = serializers.DictField(allow_null=True)
    answered_at = serializers.CharField(allow_null=True)
    answered_via = serializers.ChoiceField(
        choices=Via.choices, allow_null=True, help_text="Where the answer was given"
    )
    created_at = serializers.CharField()
    expires_at = serializers.CharField()
    reminded_at = serializers.CharField(allow_null=True)
    escalated_at = serializers.CharField(allow_null=True)

    def to_representation(self, instance):
        return instance.to_payload()


class SelectionListApi(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter(
                "status", str, enum=Selection.Status.values, description="e.g. pending"
            ),
            OpenApiParameter("conversation", str, description="Only this conversation's questions"),
            OpenApiParameter(
                "addressee", str, enum=["me"], description="Only those addressed to you"
            ),
        ],
        responses={200: SelectionSerializer(many=True), **error_responses(400, 403, 404)},
        summary="Questions you may answer, those addressed to you first, then the oldest",
        description="Anyone signed in: the questions of your workspaces that you may answer "
        "(as an owner or member; one addressed to someone else only if you are an owner), "
        "filtered by "
        "`status`, `conversation` and `addressee=me`. Each is the question as "
        "`GET /api/selections/{id}/` gives it.",
    )
    def get(self, request):
        status = request.query_params.get("status")
        if status is not None and status not in Selection.Status.values:
            raise ApplicationError(
                "invalid", f"status: must be one of {', '.join(Selection.Status.values)}."
            )
        addressee = request.query_params.get("addressee")
        if addressee not in (None, "me"):
            raise ApplicationError("invalid", "addressee: the only value is 'me'.")
        conversation_id = request.query_params.get("conversation")
        if conversation_id is not None:
            conversation_access(
                user=request.user,
                conversation_id=conversation_id,
                act=True,
                doing="answer questions",
            )
        selections = selectors.selections_answerable_by(
            user=request.user,
            status=status,
            conversation_id=conversation_id,
            addressed_to_them=addressee == "me",
        )
        return Response(SelectionSerializer(selections, many=True).data)


class WaitingApi(APIView):
    @extend_schema_serializer(component_name="Waiting")
    class OutputSerializer(serializers.Serializer):
        count = serializers.IntegerField(help_text="Questions waiting for you")
        for_me = serializers.IntegerField(help_text="How many of them are addressed to you")
        results = serializers.ListField(
            child=serializers.DictField(),
            help_text="Each question (as everywhere) with `workspace`, `conversation_title`, "
            "`started_by` (who started its turn), what led to it (`turn_input`: its turn's "
            "input; `agent_said`: the agent's last message before it in that turn, or null; "
            "each cut to 300 characters) and `role` (yours there)",
        )

    @extend_schema(
        responses={200: OutputSerializer, **error_responses()},
        summary="What waits for you: every pending question you may answer, everywhere",
        description="Anyone signed in: `count` pending questions you may answer, `for_me` how "
        "many are addressed to you, and `results`, each question with where it was asked "
        "(`workspace`, `conversation_title`, `started_by`), what led to it (`turn_input`, "
        "`agent_said`) and your `role` there. Two database queries, however many questions.",
    )
    def get(self, request):
        results = selectors.waiting_for(user=request.user)
        body = {
            "count": len(results),
            "for_me": sum(
                1 for item in results if (item["addressee"] or {}).get("id") == request.user.pk
            ),
            "results": results,
        }
        return Response(self.OutputSerializer(body).data)


@link_scoped
class SelectionDetailApi(APIView):
    @extend_schema(
        responses={200: SelectionSerializer, **error_responses(403, 404)},
        summary="One question",
        description="Owners and members of its conversation's workspace (a viewer gets 403), "
        "or an answer link's holder for its own question. Answers the question: its kind and "
        "what it asks, its status and, once settled, its answer, who gave it (`answered_by`), "
        "when and where (`answered_via`).",
    )
    def get(self, request, selection_id):
        selection = selection_access(user=request.user, selection_id=selection_id)
        return Response(SelectionSerializer(selection).data)


@link_scoped
class SelectionLinkApi(APIView):
    @extend_schema_serializer(component_name="AnswerLinkPage")
    class OutputSerializer(serializers.Serializer):
        selection = SelectionSerializer()
        conversation = serializers.DictField(help_text="`id` and `title`")
        workspace = serializers.DictField(help_text="`id` (its slug) and `name`")
        started_by = serializers.DictField(
            allow_null=True, help_text="Who started the turn that asks it"
        )
        input = serializers.CharField(help_text="What led to it: its turn's input (cut short)")
        me = serializers.DictField(help_text="Whom the credentials are for")
        role = serializers.CharField(help_text="Their role in its workspace")

    @extend_schema(
        responses={200: OutputSerializer, **error_responses(403, 404, 410)},
        summary="A question with where it was asked: what an answer link's page shows",
        description="Who may read the question may read this, an answer link's holder too. "
        "Answers the question with its conversation, workspace, who started the turn that "
        "asks it, that turn's input (cut short), whom the credentials are for and their role.",
    )
    def get(self, request, selection_id):
        selection = selection_access(user=request.user, selection_id=selection_id)
        conversation = selection.conversation
        membership = membership_of(user=request.user, workspace_id=conversation.workspace_id)
        body = {
            "selection": selection,
            "conversation": {"id": conversation.pk, "title": conversation.title},
            "workspace": {"id": conversation.workspace.slug, "name": conversation.workspace.name},
            "started_by": person(selection.turn.started_by),
            "input": Truncator(selection.turn.input).chars(LINK_INPUT_CHARS),
            "me": person(request.user),
            "role": membership.role,
        }
        return Response(self.OutputSerializer(body).data)


def _via(request) -> str:
    """Where an answer through the API came from: an answer link's page, Parley's own page (a
    signed-in browser), or a client with a token."""
    if isinstance(request.auth, AnswerLink):
        return Via.LINK
    return Via.API if api_token_id(request) is not None else Via.PAGE


@link_scoped
class SelectionReplyApi(PooledApiView):
    @extend_schema_serializer(component_name="SelectionReply")
    class InputSerializer(serializers.Serializer):
        answer = serializers.JSONField(
            required=False,
            allow_null=True,
            help_text="path: a path relative to the root; choice: a value, or a list of values "
            "when multiple; text: a string; confirm: true or false; form: the fields",
        )
        action = serializers.ChoiceField(choices=["dismiss", "decline"], required=False)

        def validate(self, attrs):
            if ("answer" in attrs) == ("action" in attrs):
                raise serializers.ValidationError("Send either an answer or an action.")
            return attrs

    @extend_schema(
        request=InputSerializer,
        responses={200: SelectionSerializer, **error_responses(400, 403, 404, 409, 410, body=True)},
        summary="Answer, dismiss or decline a question (the first answer wins)",
        description="Owners and members of its workspace may reply, but a question addressed "
        "to someone is theirs or an owner's (others get 403); so may an answer link's holder. "
        "Send `answer` (its shape depends on the question's kind) or `action`: `dismiss` or "
        "`decline`. "
        "Answers 200 with the settled question, and the waiting turn goes on. 400 "
        "`invalid_answer` for an answer that does not fit; 409 `already_resolved` when "
        "another reply came first (with the winning `status`, `answer` and `answered_by`); "
        "410 once it expired.",
    )
    def post(self, request, selection_id):
        payload = self.InputSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        selection = selection_access(user=request.user, selection_id=selection_id, answering=True)
        selection = services.selection_reply(
            selection=selection,
            user=request.user,
            answer=payload.validated_data.get("answer"),
            action=payload.validated_data.get("action"),
            via=_via(request),
        )
        return Response(SelectionSerializer(selection).data)


@link_scoped
class SelectionBrowseApi(APIView):
    @extend_schema_serializer(component_name="FolderListing")
    class OutputSerializer(serializers.Serializer):
        selection = serializers.CharField()
        mode = serializers.CharField()
        path = serializers.CharField(help_text="The folder listed, relative to the root")
        parent = serializers.CharField(allow_null=True)
        entries = serializers.ListField(child=serializers.DictField())
        skipped = serializers.ListField(
            child=serializers.DictField(),
            required=False,
            help_text="Only when some were left out: the entries that cannot be used (a loop of "
            "links, a link to nothing or outside, a pipe, no permission), each with "
            "`name`, `path` and `problem`",
        )

    @extend_schema(
        parameters=[OpenApiParameter("path", str, description="A folder inside the root")],
        responses={200: OutputSerializer, **ERRORS},
        summary="List a folder inside a pending path question's root",
        description="Those who may answer the question may browse, while it is pending. "
        "Answers the folder's `path` (relative to the question's root), its `parent` and its "
        "`entries` (`name`, `path`, `kind`, `size`, `selectable`: whether the question takes "
        "it). 400 `not_a_path_question` or `invalid_path`; 404 for a folder that is not there.",
    )
    def get(self, request, selection_id):
        selection = selection_access(user=request.user, selection_id=selection_id, answering=True)
        if selection.kind != Selection.Kind.PATH:
            raise ApplicationError("not_a_path_question", "Only path questions can be browsed.")
        services.selection_require_open(selection=selection)
        path = request.query_params.get("path", "")
        try:
            root = Within(selection.conversation.workspace.files_root, selection.root)
            listing = list_folder(root, path)
            here = listing.path
        except UnsafePath as exc:
            raise ApplicationError("invalid_path", str(exc)) from None
        except FileNotFoundError:
            raise not_found(f"Folder '{path}'") from None
        except NotADirectoryError:
            raise ApplicationError("invalid_path", f"'{path}' is a file, not a folder.") from None
        folders_only = selection.mode == Selection.Mode.FOLDER
        listed = [
            {
                **entry.as_dict(),
                "selectable": selection.mode == Selection.Mode.ANY
                or entry.kind == ("folder" if folders_only else "file"),
            }
            for entry in listing.entries
            if not (folders_only and entry.kind == "file")
        ]
        body = {
            "selection": selection.pk,
            "mode": selection.mode,
            "path": here,
            "parent": None if here == "" else here.rpartition("/")[0],
            "entries": listed,
        }
        if listing.skipped:
            body["skipped"] = [entry.as_dict() for entry in listing.skipped]
        return Response(self.OutputSerializer(body).data)
