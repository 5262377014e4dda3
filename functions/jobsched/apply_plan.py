"""Jobs as code, the pure part of ``jobsched apply``: read job specs from YAML or JSON text, validate them with
the API's own request schema (``api.schemas.JobCreate``), and plan what makes the caller's jobs match them.

A **spec** is a ``POST /jobs`` body (``name``, ``schedule``, ``target`` or ``command``, ...). A file holds one
or more: YAML documents (``---`` between them; JSON is YAML too) each holding one spec or a list of specs. A
spec is the whole desired job: a field it leaves out takes its default, as on create, except ``paused``, which
a spec manages only when it gives it (so an operator's pause is not undone by the next apply).

The plan compares each spec with the caller's job of the same ``name`` field by field (values as the models
read them, so ``2026-12-04T19:00:00+01:00`` equals ``2026-12-04T18:00:00Z``): a job that is missing is
``created``; one that differs is ``changed`` by a PATCH of only the differing fields (so ``next_run_at`` is
recomputed only when a timing field is among them); with a selector and ``prune``, a job carrying every label
of the selector that no spec names is ``deleted``; the rest are ``unchanged``. :func:`export_spec` writes a job
in the same format, with only its fields that differ from their defaults, so exporting and applying changes
nothing.

No I/O here: the CLI (``jobsched.cli.apply``) reads the files, lists the jobs and makes the calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from jobsched.api.exceptions import InvalidInput
from jobsched.api.job_checks import check_schedule_or_after
from jobsched.api.schemas import PATCH_NULLABLE_FIELDS, JobCreate
from jobsched.api.timing import TIMING_FIELDS, validated_schedule
from jobsched.labels import matches
from jobsched.models import MAX_INPUT_DEPTH, Job, JobSettings
from jobsched.schedule.engine import ScheduleError

SPEC_FIELDS: tuple[str, ...] = ("name", *JobSettings.model_fields)
"""The fields a spec sets, in the order an export writes them: ``name`` and the job's settings."""
MANAGED_ONLY_WHEN_GIVEN = frozenset({"paused"})
"""Fields a spec leaves alone unless it gives them."""


class SpecError(ValueError):
    """A spec that cannot be applied: ``source`` (file, and document or item), ``job`` (its name, or None when
    it has none), ``field`` (dotted path, or None for the whole spec) and ``message``. ``str(error)`` names all
    of them in one line."""

    def __init__(self, source: str, job: str | None, field: str | None, message: str) -> None:
        self.source, self.job, self.field, self.message = source, job, field, message
        where = f"{source}: job {job!r}" if job else source
        super().__init__(f"{where}: {field + ': ' if field else ''}{message}")


@dataclass(frozen=True)
class Spec:
    """One validated spec: where it was read (``source``), and the request it makes (``request``)."""

    source: str
    request: JobCreate

    @property
    def name(self) -> str:
        return self.request.name

    def desired(self) -> dict[str, Any]:
        """The fields the spec manages with their values (Python mode: instants as datetimes), ``paused`` only
        when given."""
        values = self.request.model_dump(include=set(SPEC_FIELDS))
        return {
            name: values[name]
            for name in SPEC_FIELDS
            if name not in MANAGED_ONLY_WHEN_GIVEN or name in self.request.model_fields_set
        }

    def body(self, fields: Iterable[str] | None = None) -> dict[str, Any]:
        """The spec as a JSON request body: every field it manages (a ``POST /jobs`` body), or only ``fields``
        (a ``PATCH``). A null the API takes only as a clear (``PATCH_NULLABLE_FIELDS``) is left out: ``schedule``
        or ``after`` given replaces the other (design §2.1)."""
        values = self.request.model_dump(mode="json", include=set(SPEC_FIELDS))
        wanted = set(self.desired()) if fields is None else set(fields)
        return {
            name: values[name]
            for name in SPEC_FIELDS
            if name in wanted and (values[name] is not None or name in PATCH_NULLABLE_FIELDS)
        }


MAX_DOCUMENT_NODES = 200_000
"""Most values (scalars, lists and mappings, an alias counted as often as it is used) one YAML document holds,
so aliases cannot expand a small file into an exponentially large value ("billion laughs")."""
MAX_DOCUMENT_DEPTH = MAX_INPUT_DEPTH + 3
"""Deepest nesting of values a YAML document may have (the parser recurses per level): a list of specs, a spec,
and an ``input`` as deep as the API takes (``models.MAX_INPUT_DEPTH``, its scalars one level below)."""
_NOT_JSON_TAGS = ("timestamp", "binary", "set", "omap", "pairs")
"""YAML types with no JSON value (``yaml.SafeLoader`` builds dates, bytes, sets and tuples of them)."""


class _SpecLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` reading only what JSON can say, as the API would receive it: mapping keys are
    strings, each given once (a key given twice is refused, not overwritten); an unquoted date stays text;
    ``!!binary``, ``!!set``, ``!!omap``, ``!!pairs`` and ``!!timestamp`` are refused; a document holds at most
    ``MAX_DOCUMENT_NODES`` values once its aliases are expanded, none containing itself, and nests at most
    ``MAX_DOCUMENT_DEPTH`` deep.
    Every refusal is a ``yaml.YAMLError`` with the line."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if not tag.endswith(":timestamp")]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DOCUMENT_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested deeper than {MAX_DOCUMENT_DEPTH} levels",
                    self.peek_event().start_mark,
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_document(self, node: yaml.Node) -> Any:
        sizes: dict[int, int] = {}
        for each in _postorder(node):
            children = _children(each)
            if any(id(child) not in sizes for child in children):  # an ancestor: the value contains itself
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    "an alias refers to a value that contains it (JSON has no cycles)",
                    each.start_mark,
                )
            sizes[id(each)] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[id(each)] > MAX_DOCUMENT_NODES:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"the document expands to more than {MAX_DOCUMENT_NODES} values (aliases count each time "
                    "they are used)",
                    each.start_mark,
                )
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, str):
                raise yaml.constructor.ConstructorError(
                    None, None, f"a key must be text, not {key!r} (quote it)", key_node.start_mark
                )
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"the key {key!r} is given twice in one mapping", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def _refuse_not_json(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    raise yaml.constructor.ConstructorError(
        None, None, f"{node.tag} has no JSON value: write it as a string", node.start_mark
    )


for _tag in _NOT_JSON_TAGS:
    _SpecLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _refuse_not_json)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _postorder(root: yaml.Node) -> list[yaml.Node]:
    """Each distinct node under ``root`` (an alias is its anchor's node) once, children before parents."""
    order: list[yaml.Node] = []
    visited: set[int] = set()
    pending: list[tuple[yaml.Node, bool]] = [(root, False)]
    while pending:
        node, expanded = pending.pop()
        if expanded:
            order.append(node)
        elif id(node) not in visited:
            visited.add(id(node))
            pending.append((node, True))
            pending.extend((child, False) for child in _children(node) if id(child) not in visited)
    return order


def read_documents(text: str, source: str) -> list[tuple[str, Any]]:
    """The specs of a file's ``text`` (YAML, of which JSON is a subset, read as JSON values: ``_SpecLoader``),
    each with where it was read: ``source`` for a file of one spec, ``source#N`` (1-based) for the N-th of
    several. Empty documents are skipped. Raises ``SpecError`` for text that is not YAML, a key given twice or
    not text, a value JSON cannot hold, an alias bomb, or a document that is neither a mapping nor a list of
    them."""
    try:
        documents = [doc for doc in yaml.load_all(text, Loader=_SpecLoader) if doc is not None]
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error)
        raise SpecError(source, None, None, f"not valid YAML or JSON{at}: {problem}") from None
    found = [
        item for document in documents for item in (document if isinstance(document, list) else [document])
    ]
    for number, item in enumerate(found, 1):
        if not isinstance(item, dict):
            raise SpecError(
                _nth(source, number, len(found)), None, None, "a spec must be a mapping of fields"
            )
    return [(_nth(source, n, len(found)), item) for n, item in enumerate(found, 1)]


def _nth(source: str, number: int, count: int) -> str:
    return source if count == 1 else f"{source}#{number}"


def validate(documents: Sequence[tuple[str, Any]]) -> list[Spec]:
    """Each ``(source, spec)`` validated as ``POST /jobs`` validates its body (``JobCreate``, then
    ``check_schedule_or_after``). Raises
    ``SpecError`` for the first spec that does not validate (naming its first error's field), or for a name
    two specs share (naming both sources)."""
    specs: list[Spec] = []
    seen: dict[str, str] = {}
    for source, document in documents:
        name = document.get("name") if isinstance(document.get("name"), str) else None
        try:
            request = JobCreate.model_validate(document)
        except ValidationError as error:
            first = error.errors()[0]
            path = ".".join(str(part) for part in first["loc"]) or None
            raise SpecError(source, name, path, first["msg"].removeprefix("Value error, ")) from None
        try:
            check_schedule_or_after(request)
        except InvalidInput as error:
            raise SpecError(source, request.name, error.field, str(error)) from None
        if request.name in seen:
            raise SpecError(source, request.name, "name", f"the name is also used by {seen[request.name]}")
        seen[request.name] = source
        specs.append(Spec(source, request))
    return specs


def current_values(job: Mapping[str, Any]) -> tuple[Job, dict[str, Any]]:
    """A job as the API returns it (JSON), read by the model, and the values of its ``SPEC_FIELDS``."""
    model = Job.model_validate(job)
    return model, model.model_dump(include=set(SPEC_FIELDS))


@dataclass(frozen=True)
class Change:
    """A job the plan changes: ``spec`` wants ``fields`` (in ``SPEC_FIELDS`` order) to change from ``before``
    to ``after`` (JSON values) on the job ``job_id``."""

    spec: Spec
    job_id: str
    fields: tuple[str, ...]
    before: dict[str, Any]
    after: dict[str, Any]


@dataclass(frozen=True)
class Deletion:
    """A job the plan deletes (pruned): its ``name`` and ``job_id``."""

    name: str
    job_id: str


@dataclass(frozen=True)
class Plan:
    """What an apply does: jobs ``created`` (their specs), ``changed``, ``deleted`` and ``unchanged`` (names),
    each in the order of the specs (deletions by name)."""

    created: list[Spec] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)
    deleted: list[Deletion] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        """Whether applying it changes nothing."""
        return not (self.created or self.changed or self.deleted)


def plan(
    specs: Sequence[Spec],
    jobs: Iterable[Mapping[str, Any]],
    *,
    selector: Mapping[str, str] | None = None,
    prune: bool = False,
) -> Plan:
    """The plan that makes ``jobs`` (the caller's jobs, as the API returns them) match ``specs``, matched by
    name; with ``prune`` (which needs a non-empty ``selector``), the jobs carrying every label of ``selector``
    that no spec names are deleted. Raises ValueError for ``prune`` without a selector."""
    if prune and not selector:
        raise ValueError("--prune needs --selector: the labels of the jobs this apply owns, e.g. app=billing")
    by_name = {str(job["name"]): job for job in jobs}
    result = Plan()
    for spec in specs:
        existing = by_name.get(spec.name)
        if existing is None:
            result.created.append(spec)
            continue
        model, current = current_values(existing)
        desired = _upstream_by_id(spec.desired(), by_name)
        differing = tuple(name for name in desired if desired[name] != current.get(name))
        if not differing:
            result.unchanged.append(spec.name)
            continue
        before = model.model_dump(mode="json", include=set(differing))
        result.changed.append(Change(spec, model.id, differing, before, spec.body(differing)))
    result.created[:] = _upstreams_first(result.created)
    if prune and selector:
        named = {spec.name for spec in specs}
        for name, job in sorted(by_name.items()):
            if name not in named and matches(job.get("labels") or {}, selector):
                result.deleted.append(Deletion(name, str(job["id"])))
    return result


def _upstreams_first(created: list[Spec]) -> list[Spec]:
    """``created`` in file order, except that a job running after another one of them comes after it (the API
    resolves an upstream's name when it creates the job). A cycle keeps file order: the API refuses it."""
    names = {spec.name for spec in created}
    ordered: list[Spec] = []
    placed: set[str] = set()
    pending = list(created)
    while pending:
        ready = [
            spec
            for spec in pending
            if spec.request.after is None or spec.request.after.job not in names - placed
        ]
        if not ready:
            return ordered + pending
        for spec in ready:
            ordered.append(spec)
            placed.add(spec.name)
            pending.remove(spec)
    return ordered


def _upstream_by_id(desired: dict[str, Any], by_name: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``desired`` with an ``after.job`` that names one of the caller's jobs by its name written as that job's id,
    as the API stores it (design §2.1), so the spec compares equal to the job it made."""
    after = desired.get("after")
    if isinstance(after, dict) and after.get("job") in by_name:
        return {**desired, "after": {**after, "job": str(by_name[after["job"]]["id"])}}
    return desired


def check_selector(specs: Sequence[Spec], selector: Mapping[str, str]) -> None:
    """Every spec carries the selector's labels, so the jobs an apply makes are the jobs it selects (and a
    later ``--prune`` keeps them). Raises ``SpecError`` naming the first spec that does not, and ``labels``."""
    for spec in specs:
        if not matches(spec.request.labels, selector):
            wanted = ", ".join(f"{key}={value}" for key, value in selector.items())
            raise SpecError(spec.source, spec.name, "labels", f"must carry the selector's labels ({wanted})")


def check_schedules(result: Plan, now_ms: int) -> None:
    """The schedules the plan registers (the created jobs', and the changed jobs' whose timing changes) checked
    as the API checks them at ``now_ms`` (epoch ms; ``api.timing.validated_schedule``, without the
    deployment's minimum interval, which only the API knows), so a schedule the API would refuse stops the
    apply before any change. Raises ``SpecError`` naming the spec and the field."""
    checked = [(spec, frozenset[str]()) for spec in result.created]
    checked += [
        (change.spec, frozenset(change.fields))
        for change in result.changed
        if TIMING_FIELDS & set(change.fields)
    ]
    for spec, changed in checked:
        try:
            validated_schedule(spec.request, now_ms, 0, changed=changed)
        except ScheduleError as error:
            raise SpecError(spec.source, spec.name, error.field, str(error)) from None


def describe(result: Plan, *, dry_run: bool) -> list[str]:
    """The plan as lines for people: one per job (``created NAME``, ``changed NAME: field, ...`` followed by one
    ``  field: before -> after`` line per field, ``deleted NAME``, ``unchanged NAME``), then a summary line
    (``... (dry run)`` when ``dry_run``)."""
    lines = [f"created {spec.name}" for spec in result.created]
    for change in result.changed:
        lines.append(f"changed {change.spec.name}: {', '.join(change.fields)}")
        lines.extend(
            f"  {name}: {_short(change.before.get(name))} -> {_short(change.after.get(name))}"
            for name in change.fields
        )
    lines += [f"deleted {deletion.name}" for deletion in result.deleted]
    lines += [f"unchanged {name}" for name in result.unchanged]
    counts = (
        f"{len(result.created)} created, {len(result.changed)} changed, {len(result.deleted)} deleted, "
        f"{len(result.unchanged)} unchanged"
    )
    lines.append(f"apply: {counts}{' (dry run: nothing was changed)' if dry_run else ''}")
    return lines


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def export_spec(job: Mapping[str, Any]) -> dict[str, Any]:
    """A job as the API returns it, as the spec that ``jobsched apply`` reads back unchanged: its ``name``,
    ``schedule`` and ``target`` (``type`` and the target's fields that differ from their defaults), and the
    other settings that differ from their defaults (``paused`` only when true), in ``SPEC_FIELDS`` order, as
    JSON values."""
    model, _ = current_values(job)
    values = model.model_dump(mode="json", include=set(SPEC_FIELDS))
    target = {"type": model.target.type, **model.target.model_dump(mode="json", exclude_defaults=True)}
    defaults = JobCreate.model_validate({"name": model.name, "schedule": model.schedule, "target": target})
    default_values = defaults.model_dump(mode="json", include=set(SPEC_FIELDS))
    exported = {"name": model.name, "schedule": model.schedule, "target": target}
    exported.update(
        {
            name: values[name]
            for name in SPEC_FIELDS
            if name not in exported and values[name] != default_values[name]
        }
    )
    return {name: exported[name] for name in SPEC_FIELDS if name in exported}


class _SpecDumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` writing a string that holds a line break other than ``\n`` (NEL U+0085, LINE or
    PARAGRAPH SEPARATOR) double-quoted, where YAML escapes it: PyYAML's plain and single-quoted styles write
    it raw, and a reader folds it into a space."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = '"' if any(char in text for char in "\x85\u2028\u2029") else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_SpecDumper.add_representer(str, _represent_text)


def dump_yaml(specs: Sequence[Mapping[str, Any]]) -> str:
    """``specs`` as YAML documents separated by ``---`` (``_SpecDumper``), keys in the specs' order, non-ASCII
    text as it is; :func:`read_documents` reads every string back unchanged."""
    return yaml.dump_all(
        [dict(spec) for spec in specs], Dumper=_SpecDumper, sort_keys=False, allow_unicode=True
    )
