//! Tests of loading and resolving registries: the shipped example,
//! resolution order and deduplication, unknown pages and tabs, the example
//! app's availability matrix (which page allows which proposal), the wire
//! conversions, and the lookups. Validation
//! errors are tested in `validate::tests`.

use std::path::PathBuf;

use parley_proto::parser::v1::ActionHandler;
use parley_proto::runner::v1::tool_endpoint::Kind;
use serde_json::json;

use super::*;

fn names<T>(items: &[Arc<T>], name: impl Fn(&T) -> &str) -> Vec<String> {
    items.iter().map(|i| name(i).to_owned()).collect()
}

fn resolve(r: &Registry, page: &str, tab: &str, subtab: &str) -> ResolvedPage {
    r.resolve(&PageRef::new(page, tab, subtab))
}

// ---- the example registry -------------------------------------------------

#[test]
fn the_example_loads_from_the_deploy_file() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy/config/registry.yaml");
    let r = Registry::load(&path).expect("the deploy registry is valid");
    assert!(r.origin().ends_with("registry.yaml"));
    assert_eq!(*r.limits(), Limits::default());
    assert!(
        r.preamble()
            .starts_with("You are the assistant built into Tables")
    );
    assert!(!r.help().is_empty());
}

#[test]
fn each_example_page_offers_its_proposals() {
    let r = Registry::example();
    // (page, schema_proposal available, data_proposal available)
    for (page, schema, data) in [
        ("tables_list", true, false),
        ("table_edit", true, false),
        ("table_view", true, true),
    ] {
        let resolved = resolve(&r, page, "", "");
        assert!(resolved.known, "{page}");
        let markers: Vec<&str> = resolved
            .marker_payload_types()
            .map(|p| p.marker.as_str())
            .collect();
        assert_eq!(
            markers.contains(&"SCHEMA_PROPOSAL"),
            schema,
            "{page}: {markers:?}"
        );
        assert_eq!(
            markers.contains(&"DATA_PROPOSAL"),
            data,
            "{page}: {markers:?}"
        );
        // suggestions are available everywhere: close_chat is a global action
        assert!(
            resolved.actions.iter().any(|a| a.action == "close_chat"),
            "{page}"
        );
    }
}

#[test]
fn resolution_is_global_then_page_then_tab_then_subtab() {
    let r = Registry::example();
    let p = resolve(&r, "table_view", "rows", "selection");
    assert!(p.known && p.tab_known && p.subtab_known);
    assert_eq!(
        names(&p.tools, |t| &t.name),
        [
            "current_time",
            "calculator",
            "lookup_rows",
            "ask_user_to_pick_rows"
        ]
    );
    assert_eq!(
        names(&p.actions, |a| &a.action),
        ["close_chat", "run_analysis"]
    );
    assert_eq!(
        names(&p.payload_types, |t| &t.name),
        ["schema_proposal", "data_proposal", "row_matches"]
    );
    assert_eq!(p.instructions.len(), 3);
    assert!(p.instructions[0].starts_with("The user is looking at the rows of one table."));
    assert!(p.instructions[1].starts_with("The rows tab"));
    assert!(p.instructions[2].starts_with("The user has selected some rows"));
    assert_eq!(
        p.context_template_keys,
        [
            "pages.table_view.context_template",
            "pages.table_view.tabs.rows.subtabs.selection.context_template"
        ]
    );

    let charts = resolve(&r, "table_view", "charts", "");
    assert_eq!(
        names(&charts.actions, |a| &a.action),
        ["close_chat", "run_analysis", "configure_chart"]
    );
}

#[test]
fn unknown_page_gets_the_globals_only() {
    let r = Registry::example();
    let p = resolve(&r, "settings", "general", "");
    assert!(!p.known && !p.tab_known && !p.subtab_known);
    assert_eq!(names(&p.tools, |t| &t.name), ["current_time", "calculator"]);
    assert_eq!(names(&p.actions, |a| &a.action), ["close_chat"]);
    assert!(p.payload_types.is_empty());
    assert!(p.instructions.is_empty());
    assert!(p.context_template.is_none());
    assert_eq!(p.page_ref.page, "settings");
}

#[test]
fn unknown_tab_and_subtab_add_nothing() {
    let r = Registry::example();
    let page_only = resolve(&r, "table_view", "", "");
    let bad_tab = resolve(&r, "table_view", "nope", "selection");
    assert!(bad_tab.known && !bad_tab.tab_known && !bad_tab.subtab_known);
    assert_eq!(
        names(&bad_tab.actions, |a| &a.action),
        names(&page_only.actions, |a| &a.action)
    );
    assert_eq!(bad_tab.instructions, page_only.instructions);

    let bad_sub = resolve(&r, "table_view", "rows", "nope");
    assert!(bad_sub.tab_known && !bad_sub.subtab_known);
    assert_eq!(bad_sub.instructions.len(), 2);
    // a subtab without its tab is not looked up
    let orphan = resolve(&r, "table_view", "", "selection");
    assert!(!orphan.subtab_known);
}

#[test]
fn items_listed_at_several_levels_appear_once_at_the_first() {
    let r = Registry::from_str(
        r#"
version: 1
payload_types:
  a: { marker: A, schema: { type: object } }
  b: { marker: B, schema: { type: object }, global: true }
tools:
  t: { builtin: t, global: true, input_schema: { type: object } }
pages:
  p:
    payload_types: [a, b]
    tools: [t]
    tabs:
      x:
        payload_types: [b, a]
        subtabs:
          y: { payload_types: [a] }
"#,
        "inline",
    )
    .expect("valid");
    let p = resolve(&r, "p", "x", "y");
    assert_eq!(names(&p.payload_types, |t| &t.name), ["b", "a"]);
    assert_eq!(names(&p.tools, |t| &t.name), ["t"]);
}

#[test]
fn parse_profile_carries_payloads_and_actions_but_no_tools() {
    let r = Registry::example();
    let profile = resolve(&r, "table_view", "charts", "").parse_profile();
    let payloads: Vec<(&str, &str)> = profile
        .payloads
        .iter()
        .map(|p| (p.name.as_str(), p.marker.as_str()))
        .collect();
    // row_matches has no marker: tools return it, the model never writes it
    assert_eq!(
        payloads,
        [
            ("schema_proposal", "SCHEMA_PROPOSAL"),
            ("data_proposal", "DATA_PROPOSAL")
        ]
    );
    let schema = profile.payloads[0].schema.as_ref().expect("schema");
    assert!(schema.fields.contains_key("definitions"));
    assert_eq!(
        profile.client_actions,
        ["close_chat", "run_analysis", "configure_chart"]
    );
    assert_eq!(profile.server_actions, ["run_analysis"]);
    // Text tool calls are the runner's: the gateway's parse never removes
    // one (docs/output-format.md#tool-calls-in-the-text).
    assert!(profile.tools.is_empty());

    let list = resolve(&r, "tables_list", "", "").parse_profile();
    assert_eq!(list.payloads.len(), 1);
    assert_eq!(list.client_actions, ["close_chat", "open_table"]);
    assert!(list.server_actions.is_empty());
}

#[test]
fn only_pages_with_grpc_or_mcp_tools_have_tools_with_effects() {
    let r = Registry::example();
    // The built-ins only: current_time and calculator.
    assert!(!resolve(&r, "tables_list", "", "").has_tools_with_effects());
    // lookup_rows is a gRPC tool.
    assert!(resolve(&r, "table_view", "", "").has_tools_with_effects());
}

#[test]
fn runner_tools_carry_endpoint_and_timeout() {
    let r = Registry::example();
    let tools = resolve(&r, "table_view", "", "").runner_tools();
    assert_eq!(tools.len(), 4);
    let builtin = &tools[0];
    assert_eq!(builtin.name, "current_time");
    assert_eq!(
        builtin.endpoint.as_ref().and_then(|e| e.kind.clone()),
        Some(Kind::Builtin("current_time".into()))
    );
    assert_eq!(
        builtin.timeout,
        Some(prost_types::Duration {
            seconds: 1,
            nanos: 0
        })
    );
    let remote = &tools[2];
    assert_eq!(remote.name, "lookup_rows");
    assert_eq!(
        remote.endpoint.as_ref().and_then(|e| e.kind.clone()),
        Some(Kind::Grpc("http://127.0.0.1:50061".into()))
    );
    assert_eq!(
        remote.timeout,
        Some(prost_types::Duration {
            seconds: 5,
            nanos: 0
        })
    );
    let schema = remote.input_schema.as_ref().expect("input schema");
    assert!(schema.fields.contains_key("properties"));
    // `approval: always`, and a tool the app runs (`runs: client`), with
    // the schema its output must satisfy.
    assert!(remote.needs_approval && !builtin.needs_approval);
    let client = &tools[3];
    assert_eq!(client.name, "ask_user_to_pick_rows");
    let Some(Kind::Client(client_tool)) = client.endpoint.as_ref().and_then(|e| e.kind.clone())
    else {
        panic!("a client endpoint: {client:?}");
    };
    assert!(client_tool.output_schema.is_some());
}

#[test]
fn describe_lists_what_the_page_resolves_to() {
    let r = Registry::example();
    let d = resolve(&r, "table_view", "charts", "").describe();
    assert!(d.known_page);
    assert!(d.system_prompt.is_empty());
    assert_eq!(d.payload_types.len(), 3);
    assert_eq!(d.payload_types[1].marker, "DATA_PROPOSAL");
    assert!(!d.payload_types[1].global);
    assert!(d.payload_types[1].schema.is_some());
    assert_eq!(d.tools.len(), 4);
    assert!(d.tools[0].global && !d.tools[2].global);
    assert!(d.tools[2].needs_approval && !d.tools[2].runs_on_client);
    assert!(d.tools[3].runs_on_client && !d.tools[3].needs_approval);
    assert!(!d.tools[0].needs_approval && !d.tools[0].runs_on_client);
    let actions: Vec<(&str, i32)> = d
        .client_actions
        .iter()
        .map(|a| (a.action.as_str(), a.handler))
        .collect();
    assert_eq!(
        actions,
        [
            ("close_chat", ActionHandler::Client as i32),
            ("run_analysis", ActionHandler::Server as i32),
            ("configure_chart", ActionHandler::Client as i32),
        ]
    );
    assert!(!resolve(&r, "elsewhere", "", "").describe().known_page);
}

#[test]
fn lookups_by_name() {
    let r = Registry::example();
    assert_eq!(
        r.stream_instructions("sales-pipeline")
            .map(|s| s.contains("EUR")),
        Some(true)
    );
    assert!(r.stream_instructions("other").is_none());
    let a = r.action("run_analysis").expect("action");
    assert_eq!(a.handler, Handler::Server);
    assert!(
        a.server
            .as_ref()
            .is_some_and(|s| s.message_template.contains("focus"))
    );
    assert!(
        r.action("close_chat")
            .is_some_and(|a| a.server.is_none() && a.global)
    );
    assert!(r.action("nope").is_none());
    assert_eq!(
        r.payload_type("data_proposal").map(|p| p.marker.as_str()),
        Some("DATA_PROPOSAL")
    );
    assert!(r.payload_type("nope").is_none());
    assert_eq!(
        r.tool("lookup_rows")
            .and_then(|t| t.payload_type.as_deref()),
        Some("row_matches")
    );
}

#[test]
fn server_action_messages_render_from_checked_params() {
    let r = Registry::example();
    assert_eq!(
        r.render_action_message("run_analysis", &json!({"focus": "Status"}))
            .expect("renders"),
        "Analyse the rows of the current table, focusing on Status, and summarise the main patterns."
    );
    assert_eq!(
        r.render_action_message("run_analysis", &json!({}))
            .expect("renders"),
        "Analyse the rows of the current table, and summarise the main patterns."
    );
    let err = r
        .render_action_message("run_analysis", &json!({"focus": 3}))
        .expect_err("focus must be a string");
    assert!(
        matches!(&err, ActionError::InvalidParams { violations, .. } if violations[0].0 == "/focus"),
        "{err}"
    );
    assert!(matches!(
        r.render_action_message("close_chat", &json!({})),
        Err(ActionError::NotServer(_))
    ));
    assert!(matches!(
        r.render_action_message("nope", &json!({})),
        Err(ActionError::Unknown(_))
    ));
}

#[test]
fn summaries_render_with_the_payload_fields() {
    let r = Registry::example();
    let s = r
        .render_summary(
            "data_proposal",
            &json!({"reasoning": "cleanup", "operations": [{"action": "add"}, {"action": "delete"}, {"action": "delete"}]}),
        )
        .expect("renders");
    assert_eq!(s.as_deref(), Some("1 add, 0 update, 2 delete: cleanup"));
    assert_eq!(
        r.render_summary("nope", &json!({})).expect("no error"),
        None
    );
}

#[test]
fn a_minimal_registry_is_valid() {
    let r = Registry::from_str("version: 1\n", "min.yaml").expect("valid");
    let p = resolve(&r, "any", "", "");
    assert!(p.tools.is_empty() && p.actions.is_empty() && p.payload_types.is_empty());
    assert!(p.parse_profile().payloads.is_empty());
}

// ---- the example's payload schemas against the documented examples (testdata/)

fn documented_example(name: &str) -> serde_json::Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/registry/testdata")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn validator(r: &Registry, payload_type: &str) -> jsonschema::Validator {
    let schema = &r.payload_type(payload_type).expect("registered").schema;
    jsonschema::validator_for(schema).expect("compiles")
}

#[test]
fn schema_proposal_schema_accepts_the_documented_examples() {
    let r = Registry::example();
    let v = validator(&r, "schema_proposal");
    let create = documented_example("schema_proposal_create.json");
    let update = documented_example("schema_proposal_update.json");
    assert!(v.is_valid(&create));
    assert!(v.is_valid(&update));

    // mode rules: create takes only `add` and needs name, description, sample rows
    let mut bad = create.clone();
    bad["operations"][1] = json!({"action": "remove", "column_id": "col_x"});
    assert!(!v.is_valid(&bad), "create with a remove");
    for field in ["table_name", "table_description", "sample_rows"] {
        let mut bad = create.clone();
        bad.as_object_mut().expect("object").remove(field);
        assert!(!v.is_valid(&bad), "create without {field}");
    }
    // operations: at least one, each of a known shape
    let mut bad = update.clone();
    bad["operations"] = json!([]);
    assert!(!v.is_valid(&bad), "no operations");
    let mut bad = update.clone();
    bad["operations"][1] = json!({"action": "modify", "column_id": "col_status", "changes": {}});
    assert!(!v.is_valid(&bad), "modify with no changes");
    let mut bad = update.clone();
    bad["operations"][0]["column"]["type"] = json!("currency");
    assert!(!v.is_valid(&bad), "unknown column type");
    let mut bad = update;
    bad["mode"] = json!("replace");
    assert!(!v.is_valid(&bad), "unknown mode");
}

#[test]
fn data_proposal_schema_accepts_the_documented_example() {
    let r = Registry::example();
    let v = validator(&r, "data_proposal");
    let example = documented_example("data_proposal.json");
    assert!(v.is_valid(&example));
    let mut string_id = example.clone();
    string_id["operations"][2]["row_id"] = json!("row_12");
    assert!(v.is_valid(&string_id), "row ids may be strings");
    let mut bad = example.clone();
    bad["operations"][0]["action"] = json!("upsert");
    assert!(!v.is_valid(&bad), "unknown action");
    let mut bad = example.clone();
    bad["operations"][1]
        .as_object_mut()
        .expect("object")
        .remove("row_id");
    assert!(!v.is_valid(&bad), "update without row_id");
    let mut bad = example;
    bad.as_object_mut().expect("object").remove("operations");
    assert!(!v.is_valid(&bad), "no operations");
}

// ---- MCP tools ------------------------------------------------------------

#[test]
fn pages_allow_the_runners_mcp_tools_by_rule() {
    use parley_proto::runner::v1 as pb;
    let r = Registry::example();
    // Until the runner has listed them, the rule allows nothing.
    let before = resolve(&r, "table_view", "", "");
    assert_eq!(
        names(&before.tools, |t| &t.name),
        vec![
            "current_time",
            "calculator",
            "lookup_rows",
            "ask_user_to_pick_rows"
        ]
    );
    let listed = |name: &str, reference: &str| pb::ToolDefinition {
        name: name.into(),
        description: "Get current time in a specific timezone".into(),
        input_schema: wire::json_to_struct(
            &json!({"type": "object", "required": ["timezone"], "properties": {"timezone": {"type": "string"}}}),
        ),
        endpoint: Some(pb::ToolEndpoint {
            kind: Some(Kind::Mcp(reference.into())),
        }),
        timeout: None,
        needs_approval: false,
    };
    r.mcp_catalog().replace(pb::ListToolsResponse {
        tools: vec![
            listed("time__get_current_time", "time/get_current_time"),
            listed("time__convert_time", "time/convert_time"),
        ],
        servers: Vec::new(),
    });
    let page = resolve(&r, "table_view", "", "");
    assert_eq!(
        names(&page.tools, |t| &t.name),
        vec![
            "current_time",
            "calculator",
            "lookup_rows",
            "ask_user_to_pick_rows",
            "time__get_current_time"
        ]
    );
    let runner = page.runner_tools();
    assert_eq!(
        runner[4].endpoint.as_ref().and_then(|e| e.kind.clone()),
        Some(Kind::Mcp("time/get_current_time".into()))
    );
    let described = page.describe();
    assert_eq!(
        described.tools[4].description,
        "Get current time in a specific timezone"
    );
    assert!(described.tools[4].input_schema.is_some());
    // Other pages have no MCP rule.
    assert!(
        resolve(&r, "tables_list", "", "")
            .tools
            .iter()
            .all(|t| !t.name.starts_with("time__"))
    );
}

#[test]
fn mcp_rules_are_checked() {
    let text = |rule: &str| format!("version: 1\npages:\n  p:\n    tools: [\"{rule}\"]\n");
    assert!(Registry::from_str(&text("time/*"), "t").is_ok());
    for bad in ["time/", "/x", "a__b/x", "time/a/b", "ti me/x"] {
        let error = Registry::from_str(&text(bad), "t").expect_err(bad);
        assert!(
            error.to_string().contains("pages.p.tools[0]"),
            "{bad}: {error}"
        );
    }
    let twice = "version: 1\npages:\n  p:\n    tools: [\"time/*\", \"time/*\"]\n";
    assert!(
        Registry::from_str(twice, "t")
            .expect_err("twice")
            .to_string()
            .contains("listed twice")
    );
}

#[test]
fn a_page_can_turn_mid_answer_failover_on_for_its_turns() {
    let r = Registry::example();
    for (page, tab, on) in [
        ("table_edit", "", true),
        ("tables_list", "", false),
        ("table_view", "rows", false),
        ("nowhere", "", false),
    ] {
        let resolved = resolve(&r, page, tab, "");
        assert_eq!(resolved.mid_answer_failover, on, "{page}");
        assert_eq!(resolved.describe().mid_answer_failover, on, "{page}");
    }
    let yaml = "version: 1\npages:\n  p:\n    mid_answer_failover: true\n    tabs:\n      t: {}\n";
    let r = Registry::from_str(yaml, "t").expect("valid");
    assert!(
        resolve(&r, "p", "t", "").mid_answer_failover,
        "tabs share it"
    );
    // A page-level setting: a tab cannot have its own.
    let tab = "version: 1\npages:\n  p:\n    tabs:\n      t: { mid_answer_failover: true }\n";
    assert!(Registry::from_str(tab, "t").is_err());
}

#[test]
fn a_page_names_its_model_and_the_models_a_request_may_ask_for() {
    let yaml = "version: 1\npages:\n  p:\n    model: smart\n    models_allowed: [cheap, smart, openai/gpt-4.1]\n    tabs:\n      t: {}\n  q: {}\n";
    let r = Registry::from_str(yaml, "t").expect("valid");
    let page = resolve(&r, "p", "t", "");
    assert_eq!(page.model.as_deref(), Some("smart"));
    let allowed: Vec<&str> = page.allowed_models().collect();
    assert_eq!(
        allowed,
        ["smart", "cheap", "openai/gpt-4.1"],
        "the default first, once"
    );
    assert_eq!(page.describe().models_allowed, allowed);
    assert_eq!(page.describe().model, "smart");
    // A page without either, and an unknown page, allow no model.
    for name in ["q", "nowhere"] {
        let page = resolve(&r, name, "", "");
        assert_eq!(page.allowed_models().count(), 0, "{name}");
    }
    for (bad, entry) in [
        ("model: 'open ai/x'", "pages.p.model"),
        ("model: openai/", "pages.p.model"),
        ("models_allowed: [a, a]", "pages.p.models_allowed[1]"),
    ] {
        let yaml = format!("version: 1\npages:\n  p:\n    {bad}\n");
        let error = Registry::from_str(&yaml, "t").expect_err(bad);
        assert!(error.to_string().contains(entry), "{bad}: {error}");
    }
    // A tab cannot choose a model of its own.
    let tab = "version: 1\npages:\n  p:\n    tabs:\n      t: { model: smart }\n";
    assert!(Registry::from_str(tab, "t").is_err());
}

#[test]
fn a_page_takes_the_attachment_types_it_lists_and_families_with_a_star() {
    let r = Registry::from_str(
        "version: 1\npages:\n  p:\n    attachments: [image/*, Application/PDF, text/csv]\n  q: {}\n",
        "t",
    )
    .expect("valid");
    let page = resolve(&r, "p", "", "");
    for (media_type, allowed) in [
        ("image/png", true),
        ("image/webp", true),
        ("application/pdf", true),
        ("text/csv", true),
        ("text/plain", false),
        ("application/zip", false),
        ("imagex/png", false),
    ] {
        assert_eq!(page.allows_attachment(media_type), allowed, "{media_type}");
    }
    assert_eq!(
        page.describe().attachment_types,
        ["image/*", "application/pdf", "text/csv"]
    );
    assert!(!resolve(&r, "q", "", "").allows_attachment("image/png"));
    for (bad, entry) in [
        ("attachments: [image]", "pages.p.attachments[0]"),
        ("attachments: ['*/*']", "pages.p.attachments[0]"),
        ("attachments: [image/*, IMAGE/*]", "pages.p.attachments[1]"),
    ] {
        let yaml = format!("version: 1\npages:\n  p:\n    {bad}\n");
        let error = Registry::from_str(&yaml, "t").expect_err(bad);
        assert!(error.to_string().contains(entry), "{bad}: {error}");
    }
}
