"""Lookups compiled once and run again with new values, for the few reads that every hot request
makes (a question or a conversation by its id).

Django builds and compiles a query's SQL afresh each time it runs: the joins of a
``select_related``, every column's quoting, the ordering. On the answer's path that was a fifth
of the server's time in the bench's profile, for SQL that never changes but for one value. A
``PreparedLookup`` compiles its query once per database thread (a compiler belongs to its
thread's connection), keeps the compiler's own row converters and related-object populators,
and each call then only runs the SQL and builds the instances, as Django's ``ModelIterable``
does. What it returns is what the queryset would return: the same instances, the same related
objects, the same annotations.
"""

import threading
from collections.abc import Callable

from django.db import connections
from django.db.models import QuerySet
from django.db.models.query import get_related_populators
from django.db.transaction import TransactionManagementError

# The stand-ins a lookup is built with, found again among the compiled query's parameters: for
# a string MARK (numbered), for a number (a workspace's id) NUMBER (less the value's place).
MARK = "parley:prepared:value"
NUMBER = -7_340_177_331


def _marks(kinds: tuple) -> list:
    return [
        MARK + (f":{place}" if place else "") if kind is str else NUMBER - place
        for place, kind in enumerate(kinds)
    ]


class _Compiled:
    __slots__ = (
        "columns",
        "compiler",
        "db",
        "locks",
        "model",
        "params",
        "populators",
        "spans",
        "sql",
    )

    def __init__(self, queryset: QuerySet, marks: list):
        compiler = queryset.query.get_compiler(using=queryset.db)
        sql, params = compiler.as_sql()
        self.params = list(params)
        spots = [
            [
                index
                for index, value in enumerate(self.params)
                if type(value) is type(mark) and value == mark
            ]
            for mark in marks
        ]
        if (
            any(len(found) != 1 for found in spots)
            or any(str(mark) in sql for mark in marks)
            or compiler.has_extra_select
        ):
            raise ValueError(
                "A prepared lookup takes each of its values as one value in one place, passed to "
                f"the database as it is, and no extra columns: {sql}"
            )
        # A lookup that locks its rows (select_for_update) runs in a transaction only, as
        # Django's own check says (made by as_sql above the first time, here every time after),
        # and on SQLite too, where Django lets it pass as it locks nothing: a lookup misused
        # there would fail on PostgreSQL.
        self.locks = bool(queryset.query.select_for_update)
        self.spans = [found[0] for found in spots]
        self.sql, self.compiler, self.db = sql, compiler, queryset.db
        klass_info, select = compiler.klass_info, compiler.select
        fields = klass_info["select_fields"]
        start, end = fields[0], fields[-1] + 1
        self.model = klass_info["model"]
        # Where the model's own columns are in a row, and their attributes.
        self.columns = (start, end, [column[0].target.attname for column in select[start:end]])
        self.populators = get_related_populators(klass_info, select, queryset.db)


class PreparedLookup:
    """``build(value)`` returns the queryset, of model instances, that a call with ``value`` (a
    string, compared as it is: an id) runs; build it for nothing but that value. ``kinds``: the
    kinds of the values ``build`` takes, in order (str, or int for a number field's)."""

    def __init__(self, build: Callable[..., QuerySet], *, kinds: tuple = (str,)):
        self._build = build
        self._marks = _marks(kinds)
        self._local = threading.local()

    def _compiled(self) -> _Compiled:
        compiled = getattr(self._local, "compiled", None)
        if compiled is None:
            compiled = self._local.compiled = _Compiled(self._build(*self._marks), self._marks)
        return compiled

    def all(self, *values) -> list:
        """The instances ``build(*values)`` would give, in its order."""
        compiled = self._compiled()
        params = list(compiled.params)
        for span, value in zip(compiled.spans, values, strict=True):
            params[span] = value
        connection = connections[compiled.db]
        if compiled.locks and connection.get_autocommit():
            raise TransactionManagementError(
                "select_for_update cannot be used outside of a transaction."
            )
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        start, end, init_list = compiled.columns
        annotations = compiled.compiler.annotation_col_map
        found = []
        for row in compiled.compiler.results_iter([rows]):
            instance = compiled.model.from_db(compiled.db, init_list, row[start:end])
            for populator in compiled.populators:
                populator.populate(row, instance)
            for name, position in annotations.items():
                setattr(instance, name, row[position])
            found.append(instance)
        return found

    def first(self, *values):
        """The first of them, or None."""
        found = self.all(*values)
        return found[0] if found else None
