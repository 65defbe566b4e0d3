"""Every attribute, event and metric name spanjudge reads or writes.

Kept in one module with no runtime dependencies so that recognisers, emitters, tests and the
Grafana/Prometheus files agree on spelling.
"""

from __future__ import annotations

# --- OpenTelemetry GenAI semantic conventions (read) ---
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
SERVICE_NAME = "service.name"  # resource attribute: the agent label when no agent name
# resource attributes a sampling filter's `environment:` reads (the current name, then the old)
DEPLOYMENT_ENVIRONMENT_NAME = "deployment.environment.name"
DEPLOYMENT_ENVIRONMENT = "deployment.environment"
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_DESCRIPTION = "gen_ai.tool.description"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"
GEN_AI_TOOL_STATUS = "gen_ai.tool.status"
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"
GEN_AI_TOOL_JSON_SCHEMA = "gen_ai.tool.json_schema"
GEN_AI_SKILL_NAME = "gen_ai.skill.name"
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_PROMPT_TOKENS = "gen_ai.usage.prompt_tokens"
GEN_AI_USAGE_COMPLETION_TOKENS = "gen_ai.usage.completion_tokens"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
GEN_AI_TOKEN_TYPE = "gen_ai.token.type"

# GenAI events (v1.36 event-based and latest experimental)
EV_GEN_AI_USER_MESSAGE = "gen_ai.user.message"
EV_GEN_AI_SYSTEM_MESSAGE = "gen_ai.system.message"
EV_GEN_AI_ASSISTANT_MESSAGE = "gen_ai.assistant.message"
EV_GEN_AI_TOOL_MESSAGE = "gen_ai.tool.message"
EV_GEN_AI_CHOICE = "gen_ai.choice"
EV_GEN_AI_INFERENCE_DETAILS = "gen_ai.client.inference.operation.details"
# Log records: the older attribute spelling of a record's event name
EVENT_NAME = "event.name"

OP_INVOKE_AGENT = "invoke_agent"
OP_INVOKE_WORKFLOW = "invoke_workflow"
OP_HANDLE_TURN = "handle_conversation_turn"
OP_EXECUTE_TOOL = "execute_tool"
OP_CHAT = "chat"
OP_TEXT_COMPLETION = "text_completion"
OP_GENERATE_CONTENT = "generate_content"
AGENT_TURN_OPERATIONS = frozenset({OP_INVOKE_AGENT, OP_INVOKE_WORKFLOW, OP_HANDLE_TURN})
MODEL_OPERATIONS = frozenset({OP_CHAT, OP_TEXT_COMPLETION, OP_GENERATE_CONTENT, "embeddings"})
SPAN_INVOCATION_INTERNAL = "gen_ai.invocation.internal"

# --- Session keys ---
SESSION_ID = "session.id"
# MCP's session: one client-server connection, which many conversations may share (read only to
# be told apart from a namespaced session id)
MCP_SESSION_ID = "mcp.session.id"

# --- OpenInference (read) ---
OI_SPAN_KIND = "openinference.span.kind"
OI_TOOL_NAME = "tool.name"
OI_TOOL_DESCRIPTION = "tool.description"
OI_TOOL_JSON_SCHEMA = "tool.json_schema"
OI_INPUT_VALUE = "input.value"
OI_OUTPUT_VALUE = "output.value"
OI_LLM_MODEL_NAME = "llm.model_name"
OI_LLM_FINISH_REASON = "llm.finish_reason"
OI_LLM_TOKEN_PROMPT = "llm.token_count.prompt"
OI_LLM_TOKEN_COMPLETION = "llm.token_count.completion"
OI_AGENT_NAME = "agent.name"
OI_METADATA = "metadata"

# --- spanjudge's own attributes (read and written) ---
SJ_SESSION_END = "spanjudge.session.end"
SJ_EXPECTED_SKILLS = "spanjudge.expected_skills"
SJ_TASK_ID = "spanjudge.task.id"
SJ_RUN_SEED = "spanjudge.run.seed"
SJ_TERMINAL_STATE = "spanjudge.terminal_state"
SJ_REVISION = "spanjudge.revision"
SJ_SESSION_COMPLETE = "spanjudge.session.complete"
SJ_SESSION_STATE = "spanjudge.session.state"
SJ_OUTCOME = "spanjudge.outcome"
SJ_REASON = "spanjudge.reason"
SJ_JUDGE = "spanjudge.judge"
SJ_VERDICT_ID = "spanjudge.verdict.id"
SJ_SCOPE_NAME = "spanjudge"
# A log record on its way to its span (spans/logs.py): never emitted, never recognised
SPAN_LOG_RECORD = "spanjudge.log_record"
# The event attribute holding a log record's body when it is neither a map nor message content
LOG_BODY = "body"
SPAN_EVALUATE = "spanjudge.evaluate"

# --- Evaluation results (written) ---
EV_EVALUATION_RESULT = "gen_ai.evaluation.result"
GEN_AI_EVALUATION_NAME = "gen_ai.evaluation.name"
GEN_AI_EVALUATION_SCORE_VALUE = "gen_ai.evaluation.score.value"
GEN_AI_EVALUATION_SCORE_LABEL = "gen_ai.evaluation.score.label"
GEN_AI_EVALUATION_EXPLANATION = "gen_ai.evaluation.explanation"
ERROR_TYPE = "error.type"

# --- Metrics (written) ---
M_VERDICTS = "spanjudge.verdicts"
M_SCORE = "spanjudge.score"
M_SESSIONS = "spanjudge.sessions"
# Sessions each evaluator saw, spanjudge.reason not_sampled / filtered_out on those its sample or
# filter left out: the sampled share per session, however many verdicts a session gets.
M_EVALUATOR_SESSIONS = "spanjudge.evaluator.sessions"
M_SKILL_EXPECTED = "spanjudge.skill.expected"
M_SKILL_OBSERVED = "spanjudge.skill.observed"
M_SESSION_TOOL_CALLS = "spanjudge.session.tool_calls"
M_SESSION_TOKENS = "spanjudge.session.tokens"
M_SESSION_DURATION = "spanjudge.session.duration"
M_SESSION_RETRIES = "spanjudge.session.retries"
M_SESSION_BACKTRACKS = "spanjudge.session.backtracks"
M_SPANS_RECEIVED = "spanjudge.spans.received"
M_SPANS_DROPPED = "spanjudge.spans.dropped"
M_SESSIONS_OPEN = "spanjudge.sessions.open"
M_EVALUATION_DURATION = "spanjudge.evaluation.duration"
M_JUDGE_TOKENS = "spanjudge.judge.tokens"
M_JUDGE_CALLS = "spanjudge.judge.calls"
# What LLM judges cost at their configured price (judges.<name>.price), attribute spanjudge.judge.
M_JUDGE_COST = "spanjudge.judge.cost"
DROP_REASON = "reason"
# log records not read as span content, by `reason` (spans/logs.py)
M_LOG_RECORDS_UNREAD = "spanjudge.log_records.unread"
LOG_UNREAD_NO_SPAN_CONTEXT = "no_span_context"  # no trace and span id: no session to join
LOG_UNREAD_NOT_CONTENT = "not_content"  # a plain log line: no event, no GenAI-shaped body
LOG_UNREAD_SPAN_NOT_SEEN = "span_not_seen"  # its span never reached the session
SCORE_BUCKETS = (0.0, 0.25, 0.5, 0.75, 1.0)

# --- Claude Code (read) ---
CC_INTERACTION = "claude_code.interaction"
CC_TOOL = "claude_code.tool"
CC_TOOL_NAME = "tool_name"

# --- OpenInference, more (read) [openinference helper] ---
OI_TOOL_CALL_ID = "tool_call.id"
# LangChain run metadata keys inside the OpenInference `metadata` JSON attribute
LC_META_GRAPH_NODE = "langgraph_node"
LC_META_THREAD_ID = "thread_id"
LC_META_AGENT_NAME = "lc_agent_name"

# --- GenAI / Strands, more (read) [strands helper] ---
GEN_AI_SKILL_RESOURCE_NAME = "gen_ai.skill.resource.name"  # ADK: resource reads and skill scripts
GEN_AI_WORKFLOW_NAME = "gen_ai.workflow.name"
EV_EXCEPTION = "exception"
EXCEPTION_MESSAGE = "exception.message"
EXCEPTION_TYPE = "exception.type"

# --- Claude Code, more (read) [claude_code helper] ---
CC_SPAN_PREFIX = "claude_code."
CC_LLM_REQUEST = "claude_code.llm_request"
CC_TOOL_EXECUTION = "claude_code.tool.execution"
CC_USER_PROMPT = "user_prompt"
CC_SKILL_NAME = "skill_name"
CC_TOOL_USE_ID = "tool_use_id"
CC_TOOL_INPUT = "tool_input"
CC_SUCCESS = "success"
CC_ERROR = "error"
CC_MODEL = "model"
CC_STOP_REASON = "stop_reason"
CC_INPUT_TOKENS = "input_tokens"
CC_OUTPUT_TOKENS = "output_tokens"
CC_CACHE_READ_TOKENS = "cache_read_tokens"
CC_CACHE_CREATION_TOKENS = "cache_creation_tokens"
CC_AGENT_ID = "agent_id"
# detailed beta tracing (ENABLE_BETA_TRACING_DETAILED): content attributes
CC_NEW_CONTEXT = "new_context"
CC_MODEL_OUTPUT = "response.model_output"
CC_SYSTEM_REMINDERS = "system_reminders"
CC_SKILL_BODY_MARKER = "Base directory for this skill:"

# --- processor (helper: processor) ---
M_INTERNAL_ERRORS = "spanjudge.internal_errors"
# closed groups of spans with no agent activity (a health check trace): counted, never judged
M_NON_AGENT_TRACES = "spanjudge.non_agent_traces"
# live series of the verdict and session metrics (series not updated for labels.series_ttl expire)
M_LABEL_SERIES = "spanjudge.label_series"
# agent and skill names longer than the longest label value, cut to it plus a hash of the whole
M_LABEL_VALUES_CUT = "spanjudge.label_values_cut"
# spans whose session key attribute (session.id, ...) held no string or integer: no key
M_SESSION_KEYS_REFUSED = "spanjudge.session_keys_refused"
DROP_QUEUE_FULL = "queue_full"
DROP_INVALID = "invalid_span"
DROP_SHUTDOWN = "after_shutdown"
SESSION_STATE_EVALUATED = "evaluated"
SESSION_STATE_INCOMPLETE = "incomplete"
SESSION_STATE_EVICTED = "evicted"

# --- judges (helper: judges) ---
# Attribute on spanjudge.judge.calls: how one call attempt ended.
JUDGE_CALL_OUTCOME = "outcome"
JUDGE_OUTCOME_OK = "ok"
JUDGE_OUTCOME_RETRIED = "retried"
JUDGE_OUTCOME_ERROR = "error"
JUDGE_OUTCOME_UNPARSEABLE = "unparseable"
JUDGE_OUTCOME_CACHED = "cached"
JUDGE_OUTCOME_UNAVAILABLE = "unavailable"
# A call not made: the judge's hourly budget (judges.<name>.budget) is spent.
JUDGE_OUTCOME_OVER_BUDGET = "over_budget"
GEN_AI_TOKEN_TYPE_INPUT = "input"
GEN_AI_TOKEN_TYPE_OUTPUT = "output"

# --- sidecar (helper: sidecar) ---
M_SIDECAR_REQUESTS = "spanjudge.sidecar.requests"
M_SIDECAR_SPOOL_BYTES = "spanjudge.sidecar.spool.bytes"
M_SIDECAR_PENDING_SPANS = "spanjudge.sidecar.pending_spans"
SIDECAR_TRANSPORT = "transport"
SIDECAR_RESULT = "result"
DROP_REJECTED = "rejected"
# Verdict items (evaluation spans, verdict log records) `serve` could not export and dropped, by
# `signal` (the OTLP signal: traces, logs) and `reason`.
M_VERDICTS_DROPPED = "spanjudge.verdicts.dropped"
EXPORT_SIGNAL = "signal"
# one item alone over the endpoint's message size limit, refused as too large: no retry can help
DROP_TOO_LARGE = "too_large"
ADK_MERGED_TOOLS = "(merged tools)"  # ADK's summary span over parallel calls: not a call itself

# --- collector-config alerts (helper: collector) ---
# Sidecar gauge (unit "By"): the spool's configured max_bytes, so that Prometheus and Grafana
# can alert on spool fill (spanjudge_sidecar_spool_bytes / spanjudge_sidecar_spool_limit_bytes).
M_SIDECAR_SPOOL_LIMIT_BYTES = "spanjudge.sidecar.spool.limit.bytes"

# --- trajectory vector (helper: trajectory) ---
# Proposed histogram: one record per numeric entry of a verdict's details["measured"]
# (side_effects created/deleted/out_of_scope..., cost total_tokens/cost, robustness
# retries/error_rate, trajectory_validity violations), so Grafana can show distributions.
SJ_TRAJECTORY_MEASURE = "spanjudge.trajectory.measure"
SJ_MEASURE_NAME = "spanjudge.measure"

# --- smolagents' OpenInference instrumentation (read): its instrumentation scope ---
SMOLAGENTS_SCOPE = "openinference.instrumentation.smolagents"

# --- Haystack's own tracer (read) [fixb helper] ---
HAYSTACK_PREFIX = "haystack."
SPAN_HAYSTACK_AGENT_RUN = "haystack.agent.run"
SPAN_HAYSTACK_LLM = "haystack.agent.step.llm"
SPAN_HAYSTACK_TOOL = "haystack.agent.step.tool"
HAYSTACK_AGENT_INPUT = "haystack.agent.input"  # JSON {"messages": [...]}
HAYSTACK_AGENT_OUTPUT = "haystack.agent.output"  # JSON {"messages": [...], "last_message": {...}}
HAYSTACK_LLM_INPUT = "haystack.agent.step.llm.input"  # a Python repr when Tools are in it
HAYSTACK_LLM_OUTPUT = "haystack.agent.step.llm.output"  # JSON {"replies": [...]}
HAYSTACK_TOOL_NAME = "haystack.tool.name"
HAYSTACK_TOOL_DESCRIPTION = "haystack.tool.description"
HAYSTACK_TOOL_INPUT = "haystack.agent.step.tool.input"
HAYSTACK_TOOL_OUTPUT = "haystack.agent.step.tool.output"
HAYSTACK_TOOL_ERROR = "haystack.tool.error"

# --- Google ADK 1.x gcp.vertex.agent.* (read) [fixb helper] ---
GCP_VERTEX_AGENT_LLM_REQUEST = "gcp.vertex.agent.llm_request"  # JSON LlmRequest on call_llm
GCP_VERTEX_AGENT_LLM_RESPONSE = "gcp.vertex.agent.llm_response"  # JSON LlmResponse on call_llm
GCP_VERTEX_AGENT_TOOL_CALL_ARGS = "gcp.vertex.agent.tool_call_args"
GCP_VERTEX_AGENT_TOOL_RESPONSE = "gcp.vertex.agent.tool_response"

# --- OpenLLMetry legacy indexed attributes and traceloop decorators (read) [fixb helper] ---
GEN_AI_LEGACY_PROMPT = "gen_ai.prompt"  # gen_ai.prompt.N.role / .content / .tool_calls.M.*
GEN_AI_LEGACY_COMPLETION = "gen_ai.completion"  # gen_ai.completion.N.*
TRACELOOP_SPAN_KIND = "traceloop.span.kind"  # workflow | agent | task | tool
TRACELOOP_ENTITY_NAME = "traceloop.entity.name"
TRACELOOP_ENTITY_INPUT = "traceloop.entity.input"  # JSON {"args": [...], "kwargs": {...}}
TRACELOOP_ENTITY_OUTPUT = "traceloop.entity.output"  # JSON of the return value
