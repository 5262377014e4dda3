"""``Idempotency-Key`` for ``POST /jobs`` and ``POST /jobs/{id}/trigger``, on Powertools' idempotency utility.

Semantics follow the IETF draft "The Idempotency-Key HTTP Header Field"
(draft-ietf-httpapi-idempotency-key-header, section 2.7 "Error Scenarios"):

- the first request with a key runs; its result is stored for 24 h and every repeat with the same key and
  the same request gets that result again (same status, same body, same job/run id);
- the same key with a different request (payload) is refused: 422 Unprocessable Content;
- the same key while the first request is still being processed: 409 Conflict.

Keys are scoped per owner (the record key hashes ``[owner, key]``), so two teams never collide. A request
that fails (bad input, missing job) stores nothing: its record is deleted and a retry runs again. Records
live in ``Settings.idempotency_table`` in Powertools' ``DynamoDBPersistenceLayer`` layout; an in-flight
record expires with the Lambda invocation that wrote it (its remaining time), so a crashed request does
not block its key for 24 h.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyValidationError
from aws_lambda_powertools.utilities.idempotency.persistence.base import BasePersistenceLayer
from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import DataRecord

KEY_TTL_S = 24 * 3600
"""How long a key's stored result is replayed (design §3: kept 24 h)."""

KEY_PREFIX = "jobsched-api"
"""Record key prefix: records do not depend on the Lambda function's name."""


@dataclass(frozen=True)
class Outcome:
    """What an idempotent call produced: ``result`` (JSON object) and whether it is a stored replay."""

    result: dict[str, Any]
    replayed: bool


def _call(call: dict[str, Any], action: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """The function Powertools guards: runs ``action`` once per ``[owner, key]``; ``call`` is what is hashed."""
    return {"result": action()}


def _mark_replay(response: Any, idempotent_data: DataRecord) -> Any:
    return {**response, "replayed": True}


class IdempotencyKeys:
    """Runs an action at most once per ``(owner, Idempotency-Key)``, replaying its stored result.

    ``persistence`` is a Powertools persistence layer (``DynamoDBPersistenceLayer`` on the idempotency table;
    tests may pass any other implementation).
    """

    def __init__(self, persistence: BasePersistenceLayer, *, expires_after_s: int = KEY_TTL_S) -> None:
        self.config = IdempotencyConfig(
            event_key_jmespath="[owner, key]",
            payload_validation_jmespath="request",
            expires_after_seconds=expires_after_s,
            hash_function="sha256",
            raise_on_no_idempotency_key=True,
            response_hook=_mark_replay,
        )
        self._guarded = idempotent_function(
            _call,
            data_keyword_argument="call",
            persistence_store=persistence,
            config=self.config,
            key_prefix=KEY_PREFIX,
        )

    @classmethod
    def on_dynamodb(cls, table_name: str, client: Any) -> IdempotencyKeys:
        """Keys stored in the DynamoDB table ``table_name`` (``resources.IDEMPOTENCY``) through ``client``."""
        return cls(DynamoDBPersistenceLayer(table_name=table_name, boto3_client=client))

    def bind_invocation(self, lambda_context: Any) -> None:
        """Record the current Lambda invocation (its remaining time bounds how long a record stays in flight)."""
        if lambda_context is not None and hasattr(lambda_context, "get_remaining_time_in_millis"):
            self.config.register_lambda_context(lambda_context)
        else:
            self.config.lambda_context = None

    def run(
        self,
        owner: str,
        key: str,
        request: Any,
        action: Callable[[], dict[str, Any]],
        *,
        formerly: Any = None,
    ) -> Outcome:
        """Run ``action`` unless ``owner`` already used ``key``; ``request`` (JSON) identifies the request.

        Returns the action's result, or the stored one for a repeat. ``formerly``: how an earlier release
        identified the same request; a stored record that matches it (not ``request``) is replayed too, so a
        client retrying across a deploy that changed the identification still gets its first answer (a record
        lives ``KEY_TTL_S``). Raises Powertools' ``IdempotencyValidationError`` (same key, different
        ``request``: 422), ``IdempotencyAlreadyInProgressError`` (the first request is still running: 409), or
        ``IdempotencyPersistenceLayerError`` (the store failed); exceptions of ``action`` propagate and store
        nothing.
        """
        try:
            stored = self._guarded(call={"owner": owner, "key": key, "request": request}, action=action)
        except IdempotencyValidationError:
            if formerly is None or formerly == request:
                raise
            stored = self._guarded(call={"owner": owner, "key": key, "request": formerly}, action=action)
        return Outcome(result=stored["result"], replayed=bool(stored.get("replayed", False)))
