//! A turn's tools, checked and bound before the turn starts.
//!
//! Every declared tool gets a valid, unique name, a compiled input schema
//! (the built-in's own when the request gives none) and its [`ToolSource`]:
//! a local tool, a remote endpoint or an MCP server's tool; a tool the app
//! runs gets its compiled output schema instead ([`ClientTool`]). Whether a
//! call must wait (for approval, or for the app) is [`PreparedTool::waits`].
//! Problems are field violations, so a bad tool declaration is
//! `INVALID_ARGUMENT` before the model is ever called.

use std::{collections::HashMap, sync::Arc, time::Duration};

use jsonschema::Validator;
use serde_json::Value;

use super::{
    MAX_TOOL_NAME_LEN, ToolRuntime, ToolSource,
    builtin::LocalSource,
    client::{ClientSource, ClientTool},
    mcp::call::McpSource,
    remote::RemoteSource,
};
use crate::{
    events::PendingReason,
    provider::ToolSpec,
    turn::{ToolDef, ToolEndpoint, Violation},
};

/// One tool, ready to validate input and run (what the model is told of
/// it is in [`TurnTools::specs`]).
#[derive(Debug)]
pub struct PreparedTool {
    /// Checks call inputs against the tool's input schema (compiled once
    /// per distinct schema, [`super::schemas`]).
    pub validator: Arc<Validator>,
    /// Where it runs.
    pub source: Arc<dyn ToolSource>,
    /// The tool's own timeout, if the request set one.
    pub timeout: Option<Duration>,
    /// Whether a call waits for the user's approval.
    pub needs_approval: bool,
    /// Set when the app runs the tool (endpoint `client`).
    pub client: Option<ClientTool>,
}

/// The tools of one turn.
#[derive(Debug, Default)]
pub struct TurnTools {
    tools: Vec<PreparedTool>,
    by_name: HashMap<String, usize>,
    /// What the model is offered, in the same order as `tools`; shared by
    /// the turn's model calls.
    specs: Arc<[ToolSpec]>,
}

impl TurnTools {
    /// Checks and binds `defs`; every problem is reported, not just the first.
    pub fn prepare(defs: Vec<ToolDef>, runtime: &ToolRuntime) -> Result<Self, Vec<Violation>> {
        let mut violations = Vec::new();
        let mut prepared = Self::default();
        let mut specs = Vec::new();
        for (index, def) in defs.into_iter().enumerate() {
            let field = |name: &str| format!("tools[{index}].{name}");
            if let Err(problem) = check_name(&def.name) {
                violations.push(Violation::new(field("name"), problem));
                continue;
            }
            if prepared.by_name.contains_key(&def.name) {
                violations.push(Violation::new(
                    field("name"),
                    format!("`{}` is declared twice", def.name),
                ));
                continue;
            }
            let mut server_schema = None;
            let mut client = None;
            let (source, fallback_description, fallback_schema): (Arc<dyn ToolSource>, _, _) =
                match &def.endpoint {
                    ToolEndpoint::Client { output_schema } => {
                        let output = match output_schema {
                            None => None,
                            Some(schema) => match runtime.schemas.validator(schema) {
                                Ok(validator) => Some(validator),
                                Err(error) => {
                                    violations.push(Violation::new(
                                        field("endpoint.client.output_schema"),
                                        format!("not a valid JSON schema: {error}"),
                                    ));
                                    continue;
                                }
                            },
                        };
                        client = Some(ClientTool { output });
                        (
                            Arc::new(ClientSource),
                            String::new(),
                            serde_json::json!({"type": "object"}),
                        )
                    }
                    ToolEndpoint::Builtin(builtin) => match runtime.local(builtin) {
                        Some(tool) => (
                            Arc::new(LocalSource(tool.clone())),
                            tool.description().to_owned(),
                            tool.input_schema(),
                        ),
                        None => {
                            let known: Vec<&str> = runtime.local_names().collect();
                            violations.push(Violation::new(
                                field("endpoint.builtin"),
                                format!(
                                    "no built-in tool `{builtin}` (built-ins: {})",
                                    known.join(", ")
                                ),
                            ));
                            continue;
                        }
                    },
                    ToolEndpoint::Grpc(address) => {
                        if let Err(problem) = super::remote::check_address(address) {
                            violations.push(Violation::new(field("endpoint.grpc"), problem));
                            continue;
                        }
                        (
                            Arc::new(RemoteSource {
                                address: address.clone(),
                                channels: runtime.channels.clone(),
                            }),
                            String::new(),
                            serde_json::json!({"type": "object"}),
                        )
                    }
                    ToolEndpoint::Mcp { server, tool } => match runtime.mcp.get(server) {
                        // The server's own description and schema when it is up;
                        // otherwise the request's, and the call fails while it is down.
                        Some(handle) => {
                            let listed = handle.snapshot().tools.get(tool).cloned();
                            let source = Arc::new(McpSource {
                                server: handle.clone(),
                                tool: tool.clone(),
                            });
                            match listed {
                                Some(listed) => {
                                    server_schema = Some(listed.input_schema.clone());
                                    (
                                        source,
                                        listed.description.clone(),
                                        listed.input_schema.clone(),
                                    )
                                }
                                None => {
                                    (source, String::new(), serde_json::json!({"type": "object"}))
                                }
                            }
                        }
                        None => {
                            violations.push(Violation::new(
                                field("endpoint.mcp"),
                                format!("no MCP server `{server}` is configured in the runner"),
                            ));
                            continue;
                        }
                    },
                };
            let schema = if let Some(schema) = server_schema {
                schema
            } else if def.input_schema.is_null()
                || def.input_schema == Value::Object(Default::default())
            {
                fallback_schema
            } else {
                def.input_schema
            };
            if schema
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t != "object")
            {
                violations.push(Violation::new(
                    field("input_schema"),
                    "the input schema must describe an object",
                ));
                continue;
            }
            let validator = match runtime.schemas.validator(&schema) {
                Ok(validator) => validator,
                Err(error) => {
                    violations.push(Violation::new(
                        field("input_schema"),
                        format!("not a valid JSON schema: {error}"),
                    ));
                    continue;
                }
            };
            let description = if def.description.is_empty() {
                fallback_description
            } else {
                def.description
            };
            prepared
                .by_name
                .insert(def.name.clone(), prepared.tools.len());
            specs.push(ToolSpec {
                name: def.name,
                description,
                input_schema: schema,
            });
            prepared.tools.push(PreparedTool {
                validator,
                source,
                timeout: def.timeout,
                needs_approval: def.needs_approval,
                client,
            });
        }
        if violations.is_empty() {
            prepared.specs = specs.into();
            Ok(prepared)
        } else {
            Err(violations)
        }
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<&PreparedTool> {
        self.by_name
            .get(name)
            .and_then(|index| self.tools.get(*index))
    }

    /// What the model is offered (shared, not copied).
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        self.specs.clone()
    }

    /// The declared names, in order.
    pub fn names(&self) -> Vec<String> {
        self.specs.iter().map(|spec| spec.name.clone()).collect()
    }

    /// Whether the turn has no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl PreparedTool {
    /// Every way `input` violates the schema, as `path: message` lines.
    pub fn check_input(&self, input: &Value) -> Result<(), String> {
        super::schemas::problems(&self.validator, input)
    }

    /// Why a call of this tool waits instead of running now: the app runs
    /// it, or it needs the user's approval; `None`: it runs.
    pub fn waits(&self) -> Option<PendingReason> {
        if self.client.is_some() {
            Some(PendingReason::Client)
        } else if self.needs_approval {
            Some(PendingReason::Approval)
        } else {
            None
        }
    }
}

/// Letters, digits, `_` and `-`, 1 to 64 characters.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a tool needs a name".into());
    }
    if name.len() > MAX_TOOL_NAME_LEN {
        return Err(format!("longer than {MAX_TOOL_NAME_LEN} characters"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(format!(
            "`{name}` may only contain letters, digits, `_` and `-`"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn def(name: &str, endpoint: ToolEndpoint, schema: Value) -> ToolDef {
        ToolDef {
            name: name.into(),
            description: String::new(),
            input_schema: schema,
            endpoint,
            timeout: None,
            needs_approval: false,
        }
    }

    #[test]
    fn builtins_get_their_own_schema_and_description() {
        let runtime = ToolRuntime::with_builtins();
        let tools = TurnTools::prepare(
            vec![def(
                "calc",
                ToolEndpoint::Builtin("calculator".into()),
                Value::Null,
            )],
            &runtime,
        )
        .expect("should succeed");
        let tool = tools.get("calc").expect("should succeed");
        assert!(tools.specs()[0].description.contains("arithmetic"));
        assert!(tool.check_input(&json!({"expression": "1+1"})).is_ok());
        let problem = tool
            .check_input(&json!({"expression": 3}))
            .expect_err("should fail");
        assert!(problem.contains("/expression"), "{problem}");
    }

    #[test]
    fn reports_every_bad_declaration() {
        let runtime = ToolRuntime::with_builtins();
        let violations = TurnTools::prepare(
            vec![
                def(
                    "ok",
                    ToolEndpoint::Builtin("current_time".into()),
                    Value::Null,
                ),
                def(
                    "ok",
                    ToolEndpoint::Builtin("current_time".into()),
                    Value::Null,
                ),
                def(
                    "bad name!",
                    ToolEndpoint::Builtin("current_time".into()),
                    Value::Null,
                ),
                def("shell", ToolEndpoint::Builtin("shell".into()), Value::Null),
                def(
                    "remote",
                    ToolEndpoint::Grpc("not a url".into()),
                    Value::Null,
                ),
                def(
                    "schema",
                    ToolEndpoint::Grpc("http://127.0.0.1:1".into()),
                    json!({"type": "object", "properties": {"a": {"type": 12}}}),
                ),
            ],
            &runtime,
        )
        .expect_err("should fail");
        let fields: Vec<&str> = violations.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            fields,
            vec![
                "tools[1].name",
                "tools[2].name",
                "tools[3].endpoint.builtin",
                "tools[4].endpoint.grpc",
                "tools[5].input_schema"
            ]
        );
    }

    #[test]
    fn client_tools_wait_for_the_app_and_check_its_output() {
        let runtime = ToolRuntime::with_builtins();
        let client = |schema: Option<Value>| ToolEndpoint::Client {
            output_schema: schema,
        };
        let mut approval = def(
            "delete",
            ToolEndpoint::Builtin("calculator".into()),
            Value::Null,
        );
        approval.needs_approval = true;
        let tools = TurnTools::prepare(
            vec![
                def(
                    "pick",
                    client(Some(json!({"type": "object", "required": ["rows"]}))),
                    Value::Null,
                ),
                approval,
                def(
                    "calc",
                    ToolEndpoint::Builtin("calculator".into()),
                    Value::Null,
                ),
            ],
            &runtime,
        )
        .expect("valid");
        let pick = tools.get("pick").expect("declared");
        assert_eq!(pick.waits(), Some(PendingReason::Client));
        assert!(pick.check_input(&json!({"any": "thing"})).is_ok());
        let output = pick.client.as_ref().expect("a client tool");
        assert!(output.check_output(&json!({"rows": []})).is_ok());
        let problem = output.check_output(&json!({})).expect_err("no rows");
        assert!(problem.contains("rows"), "{problem}");
        assert_eq!(
            tools.get("delete").and_then(PreparedTool::waits),
            Some(PendingReason::Approval)
        );
        assert_eq!(tools.get("calc").and_then(PreparedTool::waits), None);

        let violations = TurnTools::prepare(
            vec![def("pick", client(Some(json!({"type": 12}))), Value::Null)],
            &runtime,
        )
        .expect_err("a bad output schema");
        assert_eq!(
            violations[0].field,
            "tools[0].endpoint.client.output_schema"
        );
    }

    #[test]
    fn only_configured_mcp_servers_can_be_named() {
        let runtime = ToolRuntime::with_builtins();
        let violations = TurnTools::prepare(
            vec![def(
                "files__read",
                ToolEndpoint::Mcp {
                    server: "files".into(),
                    tool: "read".into(),
                },
                Value::Null,
            )],
            &runtime,
        )
        .expect_err("no such server");
        assert_eq!(violations[0].field, "tools[0].endpoint.mcp");
        assert!(
            violations[0]
                .description
                .contains("no MCP server `files` is configured"),
            "{violations:?}"
        );
    }
}
