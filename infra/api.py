"""The REST API (API Gateway): design §3 routes, IAM (SigV4) auth on every method, access logs.

Every route of design §3 is declared from the API's one route table (``jobsched.api.routes.ROUTES``, from
which the handler's routes are registered too), so an unknown path never reaches the function, and each is
proxied to the one API function, which owns validation, error mapping and the owner check. The
caller's identity (``requestContext.identity.userArn``) is the owner: API Gateway has already
verified the SigV4 signature.

Request size: API Gateway accepts bodies up to 10 MB (a fixed quota, not configurable); the handler
answers 413 above ``Settings.api_max_body_bytes`` (256 KiB by default). API Gateway's own errors
(bad signature, throttling, too large, ...) are rewritten to the API's error shape
``{"error": {"code", "message"}}`` so clients parse one format.
"""

from __future__ import annotations

import json

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.config import DeploymentConfig
from infra.nag import acknowledge
from jobsched.api import routes

STAGE = "v1"

ROUTES: dict[str, tuple[str, ...]] = routes.methods_by_path()
"""Path -> methods, from the API's one route table (``jobsched.api.routes``, which the handler's routes are
registered from): a route added to the API is declared here too."""

QUERY_PARAMETERS: dict[tuple[str, str], tuple[str, ...]] = {
    (route.path, route.method): route.query for route in routes.ROUTES if route.query
}
"""Optional query strings, declared for documentation (the handler validates their values)."""

# API Gateway's own refusals, in the API's error shape. ``$context.error.messageString`` is a quoted
# JSON string. MISSING_AUTHENTICATION_TOKEN is also what API Gateway answers for an unknown path.
GATEWAY_ERRORS: dict[str, tuple[str | None, str]] = {
    "MISSING_AUTHENTICATION_TOKEN": ("401", "unauthorized"),
    "INVALID_SIGNATURE": ("401", "unauthorized"),
    "EXPIRED_TOKEN": ("401", "unauthorized"),
    "UNAUTHORIZED": ("401", "unauthorized"),
    "ACCESS_DENIED": ("403", "forbidden"),
    "REQUEST_TOO_LARGE": ("413", "payload_too_large"),
    "THROTTLED": ("429", "throttled"),
    "QUOTA_EXCEEDED": ("429", "throttled"),
    "BAD_REQUEST_PARAMETERS": ("400", "invalid_input"),
    "BAD_REQUEST_BODY": ("400", "invalid_input"),
    "UNSUPPORTED_MEDIA_TYPE": ("415", "unsupported_media_type"),
    "INTEGRATION_TIMEOUT": ("504", "timeout"),
    "DEFAULT_4XX": (None, "invalid_input"),
    "DEFAULT_5XX": (None, "internal_error"),
}
"""API Gateway response type -> (status override or None to keep API Gateway's, error code). The codes are
the ones ``jobsched.api.errors`` uses for the same conditions."""

_FIELDS = {"REQUEST_TOO_LARGE": "body"}


def error_template(response_type: str) -> str:
    """The body template of one gateway response: the API's error shape, API Gateway's message."""
    _, code = GATEWAY_ERRORS[response_type]
    field = json.dumps(_FIELDS.get(response_type))
    # $context.error.messageString is already a quoted JSON string.
    message = "$context.error.messageString"
    return f'{{"error": {{"code": "{code}", "message": {message}, "field": {field}}}}}'


_ACCESS_LOG = {
    "request_id": apigw.AccessLogField.context_request_id(),
    "time": apigw.AccessLogField.context_request_time(),
    "ip": apigw.AccessLogField.context_identity_source_ip(),
    "caller": apigw.AccessLogField.context_identity_user_arn(),
    "method": apigw.AccessLogField.context_http_method(),
    "resource": apigw.AccessLogField.context_resource_path(),
    "path": apigw.AccessLogField.context_path(),
    "status": apigw.AccessLogField.context_status(),
    "protocol": apigw.AccessLogField.context_protocol(),
    "response_length": apigw.AccessLogField.context_response_length(),
    "latency_ms": apigw.AccessLogField.context_response_latency(),
    "integration_latency_ms": apigw.AccessLogField.context_integration_latency(),
    "error": apigw.AccessLogField.context_error_response_type(),
}


class Api(Construct):
    """The REST API in front of ``handler`` (named after the stack); attributes ``rest_api``, ``url``,
    ``access_logs``, ``execution_logs`` (the stage's execution log group, owned by the stack).

    Throttling (steady rate and burst) and log retention come from ``config.infra``.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, handler: lambda_.IFunction, config: DeploymentConfig
    ) -> None:
        super().__init__(scope, construct_id)
        infra = config.infra
        self.access_logs = logs.LogGroup(
            self,
            "AccessLogs",
            retention=logs.RetentionDays[infra.log_retention_name],
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            # Named after the stack: two stacks of one account keep their APIs (and API metrics) apart.
            rest_api_name=Stack.of(self).stack_name,
            description="jobsched: register jobs, read runs (SigV4)",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            # Execution logs (errors only, never bodies) need API Gateway's account-level CloudWatch
            # role; it is retained on delete because it is shared by every REST API of the account.
            cloud_watch_role=True,
            deploy_options=apigw.StageOptions(
                stage_name=STAGE,
                access_log_destination=apigw.LogGroupLogDestination(self.access_logs),
                access_log_format=apigw.AccessLogFormat.custom(json.dumps(_ACCESS_LOG)),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                metrics_enabled=True,
                throttling_rate_limit=infra.api_throttle_rate_limit,
                throttling_burst_limit=infra.api_throttle_burst_limit,
            ),
            default_method_options=apigw.MethodOptions(authorization_type=apigw.AuthorizationType.IAM),
        )
        # Parameters are checked by API Gateway (a route with {id} must have it). Bodies have no
        # model here: the handler validates them with the pydantic models (one schema, one error
        # shape), so body validation on this validator has nothing to check.
        validator = self.rest_api.add_request_validator(
            "Validator", validate_request_parameters=True, validate_request_body=True
        )
        integration = apigw.LambdaIntegration(
            handler,
            proxy=True,
            # One resource-policy statement for the whole API instead of one per method.
            scope_permission_to_method=False,
        )
        for route in routes.ROUTES:
            resource = self.rest_api.root.resource_for_path(route.path)
            parameters = {f"method.request.path.{name}": True for name in route.path_parameters}
            for name in route.query:
                parameters[f"method.request.querystring.{name}"] = False
            api_method = resource.add_method(
                route.method,
                integration,
                authorization_type=apigw.AuthorizationType.IAM,
                request_validator=validator,
                request_parameters=parameters or None,
            )
            acknowledge(
                api_method,
                "AwsSolutions-COG4",
                "Callers are AWS principals (team roles, CI), authenticated with SigV4 by IAM authorization "
                "(design §3); the owner is the caller's IAM identity. A Cognito user pool would add a "
                "second identity system for machine callers that already have one.",
            )
        for response_type, (status, _) in GATEWAY_ERRORS.items():
            self.rest_api.add_gateway_response(
                f"Error{response_type.title().replace('_', '')}",
                type=getattr(apigw.ResponseType, _response_type_attr(response_type)),
                status_code=status,
                templates={"application/json": error_template(response_type)},
            )
        acknowledge(
            self.rest_api.node.find_child("CloudWatchRole"),
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/"
            "AmazonAPIGatewayPushToCloudWatchLogs]",
            "API Gateway's account-level logging role (assumable only by apigateway.amazonaws.com) uses the "
            "AWS managed policy AWS documents for it; it is needed for the stage's execution logs.",
        )
        acknowledge(
            self.rest_api.deployment_stage,
            "AwsSolutions-APIG3",
            "No WAF web ACL by default: every method requires a SigV4 signature (IAM auth rejects anonymous "
            "traffic before it reaches the function) and the stage is throttled. A web ACL can be associated "
            "with the stage later without changing this stack.",
        )
        # API Gateway writes the stage's execution logs to a group of this exact name, creating it on first
        # use if it does not exist (then with no retention, and outliving the stack). The stack creates it
        # first, so it is owned: the deployment's retention, deleted by `cdk destroy`.
        self.execution_logs = logs.LogGroup(
            self,
            "ExecutionLogs",
            log_group_name=execution_log_group_name(self.rest_api.rest_api_id, STAGE),
            retention=logs.RetentionDays[infra.log_retention_name],
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.rest_api.deployment_stage.node.add_dependency(self.execution_logs)
        # The stack exports the URL once, as ApiUrl; drop RestApi's auto-named duplicate output.
        self.rest_api.node.try_remove_child("Endpoint")
        self.url: str = self.rest_api.url


def execution_log_group_name(rest_api_id: str, stage: str) -> str:
    """The log group API Gateway writes a stage's execution logs to (a fixed name API Gateway chooses)."""
    return f"API-Gateway-Execution-Logs_{rest_api_id}/{stage}"


def _response_type_attr(name: str) -> str:
    # jsii spells DEFAULT_4XX as DEFAULT_4_XX.
    return {"DEFAULT_4XX": "DEFAULT_4_XX", "DEFAULT_5XX": "DEFAULT_5_XX"}.get(name, name)
