//! Every OpenTelemetry name Parley emits, pinned in one place.
//!
//! The GenAI conventions are in development (they now live in their own
//! repository, and the Rust `opentelemetry-semantic-conventions` crate marks
//! its `GEN_AI_*` constants deprecated), and the RPC conventions were renamed
//! recently (`rpc.system.name`, `rpc.method` = `package.Service/Method`,
//! `rpc.response.status_code` as a string). When the spec moves, this file
//! is the one to change. Prometheus metric names are derived from the OTel
//! names the way the OTel-to-Prometheus compatibility spec does it: dots
//! become underscores, the unit becomes a suffix (`_seconds`), counters end
//! in `_total`; the labels are the attribute names with underscores.

// ---- RPC (spans and metrics) ----

/// `grpc` for every Parley RPC.
pub const RPC_SYSTEM_NAME: &str = "rpc.system.name";
/// The fully qualified method, `package.Service/Method`; also the span name.
pub const RPC_METHOD: &str = "rpc.method";
/// The status code's name, `OK`, `DEADLINE_EXCEEDED`, ...
pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
/// The value of [`RPC_SYSTEM_NAME`].
pub const RPC_SYSTEM_GRPC: &str = "grpc";
/// The method label used for a path that names no known method.
pub const OTHER: &str = "_OTHER";

/// The server's host as the client addressed it.
pub const SERVER_ADDRESS: &str = "server.address";
/// The server's port as the client addressed it.
pub const SERVER_PORT: &str = "server.port";
/// The class of error an operation ended with (only on failures).
pub const ERROR_TYPE: &str = "error.type";

// ---- GenAI (spans) ----

/// `chat`, `invoke_agent`, `execute_tool`.
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// The provider: `openai`, `anthropic`, `gcp.gemini`, `parley.scripted`.
pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
/// The model asked for.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
/// The largest number of tokens the model may generate.
pub const GEN_AI_REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
/// The model that answered, as the provider reported it.
pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
/// The provider's id of the response.
pub const GEN_AI_RESPONSE_ID: &str = "gen_ai.response.id";
/// Why the model stopped, one entry per choice.
pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// Seconds from sending the request to the first streamed chunk.
pub const GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK: &str = "gen_ai.response.time_to_first_chunk";
/// Prompt tokens.
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// Generated tokens.
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// The part of the prompt tokens read from the provider's cache.
pub const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// The part of the prompt tokens written to the provider's cache.
pub const GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: &str =
    "gen_ai.usage.cache_creation.input_tokens";
/// The conversation (Parley's conversation id).
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// `json` when the request asks for structured output.
pub const GEN_AI_OUTPUT_TYPE: &str = "gen_ai.output.type";
/// The agent's name.
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
/// The tool called.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// The model's id of the tool call.
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `function` (a tool the agent runs) or `extension` (a remote service).
pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
/// `input` or `output`, on the token usage metric.
pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";

/// Content attributes: recorded only when content capture is switched on.
pub const GEN_AI_SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
/// The messages sent to the model (content capture only).
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// The model's answer (content capture only).
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// A tool call's arguments (content capture only).
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// A tool call's result (content capture only).
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";

/// Operation names.
pub const OP_CHAT: &str = "chat";
/// Operation names.
pub const OP_INVOKE_AGENT: &str = "invoke_agent";
/// Operation names.
pub const OP_EXECUTE_TOOL: &str = "execute_tool";

// ---- Parley's own span attributes ----

/// The gateway's turn id.
pub const PARLEY_TURN_ID: &str = "parley.turn.id";
/// The page a turn runs on.
pub const PARLEY_PAGE: &str = "parley.page";
/// How a turn ended: `completed`, `failed`, `cancelled`.
pub const PARLEY_TURN_OUTCOME: &str = "parley.turn.outcome";

// ---- Metric names (Prometheus form) and their labels ----

/// Duration of an incoming call (OTel `rpc.server.call.duration`, seconds).
pub const METRIC_RPC_SERVER_DURATION: &str = "rpc_server_call_duration_seconds";
/// Duration of an outgoing call (OTel `rpc.client.call.duration`, seconds).
pub const METRIC_RPC_CLIENT_DURATION: &str = "rpc_client_call_duration_seconds";
/// Incoming calls still running (streams still open).
pub const METRIC_RPC_ACTIVE: &str = "parley_rpc_server_active_streams";
/// Turns by how they ended.
pub const METRIC_TURNS: &str = "parley_turns_total";
/// The gateway's turns by tenant and how they ended.
pub const METRIC_TENANT_TURNS: &str = "parley_tenant_turns_total";
/// Input + output tokens of the gateway's turns, by tenant.
pub const METRIC_TENANT_TOKENS: &str = "parley_tenant_tokens_total";
/// Tokens of the gateway's turns, by the model that answered and the kind
/// (`input`, `output`, and the parts `cached_input`, `cache_write`, `reasoning`).
pub const METRIC_TOKENS: &str = "parley_tokens_total";
/// What the gateway's turns cost, in units of the currency (the label), by
/// tenant and the model that answered.
pub const METRIC_COST: &str = "parley_cost_total";
/// The runner's model calls to a model no route prices (they cost 0), by
/// provider and model.
pub const METRIC_UNPRICED_CALLS: &str = "parley_unpriced_calls_total";
/// Turns the gateway refused before they started, by tenant and reason.
pub const METRIC_TENANT_REJECTED: &str = "parley_tenant_turns_rejected_total";
/// Turns cancelled because nobody followed them any more, by tenant.
pub const METRIC_TENANT_ABANDONED: &str = "parley_tenant_turns_abandoned_total";
/// Users' decisions on proposal cards, by payload type and decision.
pub const METRIC_PAYLOAD_DECISIONS: &str = "parley_payload_decisions_total";
/// Users' ratings of turns, by page and rating.
pub const METRIC_FEEDBACK: &str = "parley_feedback_total";
/// OTel `gen_ai.client.token.usage`.
pub const METRIC_TOKEN_USAGE: &str = "gen_ai_client_token_usage";
/// OTel `gen_ai.client.operation.duration` (seconds).
pub const METRIC_OPERATION_DURATION: &str = "gen_ai_client_operation_duration_seconds";
/// OTel `gen_ai.client.operation.time_to_first_chunk` (seconds).
pub const METRIC_TIME_TO_FIRST_CHUNK: &str = "gen_ai_client_operation_time_to_first_chunk_seconds";
/// Tool calls, by tool and outcome (seconds).
pub const METRIC_TOOL_DURATION: &str = "parley_tool_call_duration_seconds";
/// Model call retries, by provider and reason.
pub const METRIC_RETRIES: &str = "parley_model_retries_total";
/// Fallbacks to the next model, by provider and reason.
pub const METRIC_FALLBACKS: &str = "parley_model_fallbacks_total";
/// Diagnostics of the parses a process made, by kind.
pub const METRIC_PARSER_DIAGNOSTICS: &str = "parley_parser_diagnostics_total";
/// Whether each configured MCP server is ready (1) or not (0: starting or down).
pub const METRIC_MCP_SERVER_UP: &str = "parley_mcp_server_up";
/// Attempts to start or connect each configured MCP server, by outcome.
pub const METRIC_MCP_SERVER_CONNECTS: &str = "parley_mcp_server_connects_total";
/// The runner's requests to a provider, by the configured provider, the
/// name of the API key sent (its variable or file name, never its value)
/// and the outcome (`ok`, `rate_limited`, `rejected`, `error`).
pub const METRIC_PROVIDER_KEY_REQUESTS: &str = "parley_provider_key_requests_total";
/// Times a provider's API key was set aside, by provider, key and reason
/// (`rate_limited`: cooling down; `rejected`: out until SIGHUP reloads it
/// or the runner restarts).
pub const METRIC_PROVIDER_KEY_COOLDOWNS: &str = "parley_provider_key_cooldowns_total";

/// Label: [`RPC_METHOD`].
pub const LABEL_RPC_METHOD: &str = "rpc_method";
/// Label: [`RPC_RESPONSE_STATUS_CODE`].
pub const LABEL_RPC_STATUS: &str = "rpc_response_status_code";
/// Label: [`SERVER_ADDRESS`].
pub const LABEL_SERVER_ADDRESS: &str = "server_address";
/// Label: [`GEN_AI_OPERATION_NAME`].
pub const LABEL_OPERATION: &str = "gen_ai_operation_name";
/// Label: [`GEN_AI_PROVIDER_NAME`].
pub const LABEL_PROVIDER: &str = "gen_ai_provider_name";
/// Label: [`GEN_AI_REQUEST_MODEL`].
pub const LABEL_MODEL: &str = "gen_ai_request_model";
/// Label: [`GEN_AI_TOKEN_TYPE`].
pub const LABEL_TOKEN_TYPE: &str = "gen_ai_token_type";
/// Label: [`GEN_AI_TOOL_NAME`].
pub const LABEL_TOOL: &str = "gen_ai_tool_name";
/// Label: [`ERROR_TYPE`].
pub const LABEL_ERROR_TYPE: &str = "error_type";
/// Label: how something ended (`ok` or a stable reason).
pub const LABEL_OUTCOME: &str = "outcome";
/// Label: a stable UPPER_SNAKE reason.
pub const LABEL_REASON: &str = "reason";
/// The caller's tenant (empty without one; capped).
pub const LABEL_TENANT: &str = "tenant";
/// Label: a registered payload type (`_OTHER` for one no longer registered).
pub const LABEL_PAYLOAD_TYPE: &str = "payload_type";
/// Label: a user's decision (`accepted`, `dismissed`, `edited`).
pub const LABEL_DECISION: &str = "decision";
/// Label: a registered page (`_OTHER` for one no longer registered).
pub const LABEL_PAGE: &str = "page";
/// Label: a rating (`-1`, `1` to `5`).
pub const LABEL_RATING: &str = "rating";
/// Label: a diagnostic kind, or a kind of tokens.
pub const LABEL_KIND: &str = "kind";
/// Label: the model that answered a turn (capped).
pub const LABEL_TURN_MODEL: &str = "model";
/// Label: an ISO 4217 currency code.
pub const LABEL_CURRENCY: &str = "currency";
/// Label: a configured MCP server's name (bounded by the configuration).
pub const LABEL_MCP_SERVER: &str = "server";
/// Label: a configured provider's name (bounded by the configuration).
pub const LABEL_CONFIGURED_PROVIDER: &str = "provider";
/// Label: the name of a provider's API key, its variable or file name
/// (bounded by the configuration; never the key itself).
pub const LABEL_PROVIDER_KEY: &str = "key";
