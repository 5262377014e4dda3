"""The run state machine (``jobsched.domain.run_states``) rendered as DynamoDB requests on the runs table: each
step of the table becomes one conditional ``UpdateItem`` (or, for ``insert``, one ``PutItem``) whose
``ConditionExpression`` and ``UpdateExpression`` say exactly what the transition says.

The renderer adds what the table's layout (``jobsched.dynamodb.layout``) keeps beside a row's fields, and nothing
else: ``sweep_pk`` is written and removed with ``sweep_at`` (the sparse sweep index's partition key), and
``fail_owner`` (the sparse ``failures`` index's) follows a written status: set to the owner the write names when
the status is a failure status (``FAILURE_STATUSES``), removed when it is not. A transition that is not an
insert or a creating claim also needs the row to exist (``attribute_exists(job_id)``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from jobsched.domain.run_states import (
    Absent,
    All,
    AnyOf,
    Compare,
    Condition,
    Const,
    Fill,
    IfGiven,
    Insert,
    NoRow,
    Param,
    PlusOne,
    Remove,
    Set,
    StatusIn,
    Stored,
    StoredOr,
    admits_no_row,
    written_fields,
)
from jobsched.domain.run_steps import Step, value_of
from jobsched.dynamodb.layout import (
    FAIL_OWNER,
    RUN_ATTRIBUTES,
    TRIES_ATTRIBUTE,
    run_item,
    sweep_keys,
    tries_value,
)
from jobsched.ports.runs import FAILURE_STATUSES, RunRow

KEY_ATTRIBUTES = ("job_id", "scheduled_for")
INDEX_ATTRIBUTES = ("sweep_pk", FAIL_OWNER)
"""Attributes the layout derives from a row's fields (not named by the table)."""


def attribute(name: str) -> str:
    """The runs-table attribute of ``RunRow`` field ``name``."""
    return TRIES_ATTRIBUTE if name == "tries" else RUN_ATTRIBUTES[name]


def stored(name: str, value: Any) -> Any:
    """``value`` of field ``name`` as the runs table stores it (statuses and kinds by value, tries as maps)."""
    if name == "tries":
        return tries_value(value)
    return value.value if isinstance(value, Enum) else value


@dataclass
class _Expression:
    """Placeholders of one request: ``#n<i>`` for attribute names, ``:v<i>`` for values."""

    names: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)

    placeholders: dict[str, str] = field(default_factory=dict)
    """``names`` inverted: each attribute name's placeholder."""

    def name(self, attribute_name: str) -> str:
        placeholder = self.placeholders.get(attribute_name)
        if placeholder is None:
            placeholder = self.placeholders[attribute_name] = f"#n{len(self.names)}"
            self.names[placeholder] = attribute_name
        return placeholder

    def value(self, value: Any) -> str:
        placeholder = f":v{len(self.values)}"
        self.values[placeholder] = value
        return placeholder


def _condition(condition: Condition, params: dict[str, Any], e: _Expression) -> str:
    if isinstance(condition, NoRow):
        return f"attribute_not_exists({e.name('job_id')})"
    if isinstance(condition, StatusIn):
        status = e.name("status")
        if len(condition.statuses) == 1:
            return f"{status} = {e.value(condition.statuses[0].value)}"
        return f"{status} IN ({', '.join(e.value(s.value) for s in condition.statuses)})"
    if isinstance(condition, Absent):
        return f"attribute_not_exists({e.name(attribute(condition.field))})"
    if isinstance(condition, Compare):
        value = stored(condition.field, params[condition.param])
        return f"{e.name(attribute(condition.field))} {condition.op} {e.value(value)}"
    if isinstance(condition, IfGiven):
        raise ValueError("resolve the condition first")
    joiner = " AND " if isinstance(condition, All) else " OR "
    return joiner.join(
        f"({_condition(p, params, e)})" if isinstance(p, All | AnyOf) else _condition(p, params, e)
        for p in condition.parts
    )


def condition_expression(step: Step, e: _Expression) -> str:
    """The ``ConditionExpression`` of ``step`` (placeholders in ``e``)."""
    params = dict(step.params)
    condition = step.transition.resolved(params)
    creates = condition is not None and admits_no_row(condition)
    text = _condition(condition, params, e) if condition is not None else None
    if creates:
        assert text is not None
        return text
    exists = f"attribute_exists({e.name('job_id')})"
    return exists if text is None else f"{exists} AND ({text})"


def update_expression(step: Step, e: _Expression) -> str:
    """The ``UpdateExpression`` of ``step`` (placeholders in ``e``), with the layout's index attributes."""
    params = dict(step.params)
    sets: list[str] = []
    removes: list[str] = []
    resolved: dict[str, Any] = {}
    for write in step.transition.writes:
        if isinstance(write, Remove):
            removes.append(e.name(attribute(write.field)))
            resolved[write.field] = None
        elif isinstance(write, Set):
            sets_or_remove = _assignment(write, params, e)
            if sets_or_remove is None:
                continue
            if sets_or_remove == "REMOVE":
                removes.append(e.name(attribute(write.field)))
                resolved[write.field] = None
            else:
                sets.append(sets_or_remove)
                if isinstance(write.value, Param | Const):
                    resolved[write.field] = value_of(write.value, None, params)
        elif isinstance(write, Fill):
            sets.extend(_fill(write, step, e))
    if "sweep_at" in resolved:
        if resolved["sweep_at"] is None:
            removes.append(e.name("sweep_pk"))
        else:
            pk = sweep_keys(step.key.job_id, resolved["sweep_at"])["sweep_pk"]
            sets.append(f"{e.name('sweep_pk')} = {e.value(pk)}")
    if "status" in resolved:
        status = resolved["status"]
        if status not in FAILURE_STATUSES:
            removes.append(e.name(FAIL_OWNER))
        elif resolved.get("owner") is not None:
            sets.append(f"{e.name(FAIL_OWNER)} = {e.value(resolved['owner'])}")
    clauses = []
    if sets:
        clauses.append("SET " + ", ".join(sets))
    if removes:
        clauses.append("REMOVE " + ", ".join(removes))
    return " ".join(clauses)


def _assignment(write: Set, params: dict[str, Any], e: _Expression) -> str | None:
    """``#f = <value>``, or "REMOVE" for a None value, or None for a None value of a ``given_only`` write."""
    value = write.value
    if isinstance(value, Stored):
        return f"{e.name(attribute(write.field))} = {e.name(attribute(value.field))}"
    if isinstance(value, Param | Const) and value_of(value, None, params) is None:
        return None if write.given_only else "REMOVE"
    target = e.name(attribute(write.field))
    if isinstance(value, PlusOne):
        return f"{target} = if_not_exists({target}, {e.value(0)}) + {e.value(1)}"
    if isinstance(value, StoredOr):
        return f"{target} = if_not_exists({target}, {e.value(stored(write.field, params[value.param]))})"
    return f"{target} = {e.value(stored(write.field, value_of(value, None, params)))}"


def _fill(write: Fill, step: Step, e: _Expression) -> list[str]:
    """``#a = if_not_exists(#a, :v)`` for each attribute of the ``Fill``'s row but the key, the layout's index
    attributes and the attributes of the fields it leaves out or the transition writes."""
    source: RunRow | None = step.params.get(write.param)
    if source is None:
        return []
    skipped = {attribute(f) for f in (*write.except_fields, *written_fields(step.transition))}
    skipped.update(KEY_ATTRIBUTES, INDEX_ATTRIBUTES)
    out = []
    for name, value in sorted(run_item(source).items()):
        if name not in skipped:
            target = e.name(name)
            out.append(f"{target} = if_not_exists({target}, {e.value(value)})")
    return out


def request(step: Step) -> tuple[str, dict[str, Any]]:
    """The DynamoDB request of ``step``: ``("put_item", kwargs)`` for an insert, else ``("update_item", kwargs)``
    (without ``Key``/``Item``'s table; ``ReturnValues`` as the transition ``answers``)."""
    e = _Expression()
    condition = condition_expression(step, e)
    insert = next((w for w in step.transition.writes if isinstance(w, Insert)), None)
    kwargs: dict[str, Any] = {"ConditionExpression": condition}
    if step.transition.answers is not None:
        kwargs["ReturnValuesOnConditionCheckFailure"] = "ALL_OLD"
    if insert is not None:
        kwargs["Item"] = run_item(step.params[insert.param])
        method = "put_item"
    else:
        kwargs["Key"] = {"job_id": step.key.job_id, "scheduled_for": step.key.scheduled_for}
        kwargs["UpdateExpression"] = update_expression(step, e)
        if step.transition.answers == "before":
            kwargs["ReturnValues"] = "ALL_OLD"
        elif step.transition.answers == "after":
            kwargs["ReturnValues"] = "ALL_NEW"
        method = "update_item"
    kwargs["ExpressionAttributeNames"] = e.names
    if e.values:
        kwargs["ExpressionAttributeValues"] = e.values
    return method, kwargs
