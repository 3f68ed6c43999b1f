//! Admitting a server's tools (names, limits, clashes between servers) and
//! the published state.

use parley_proto::runner::v1 as pb;

use super::*;

fn server(name: &str, reserved: &[&str]) -> Arc<McpServer> {
    McpServer::new(
        name.to_owned(),
        McpServerConfig::stdio(vec!["unused".into()]),
        PathBuf::new(),
        Arc::new(|_: &str| None),
        Arc::new(reserved.iter().map(|r| (*r).to_owned()).collect()),
    )
}

fn tool(name: &str) -> rmcp::model::Tool {
    serde_json::from_value(serde_json::json!({
        "name": name,
        "description": format!("the tool {name}"),
        "inputSchema": {"type": "object"},
    }))
    .expect("a tool")
}

#[test]
fn a_server_tool_cannot_take_a_reserved_or_repeated_name() {
    // `s__clock` stands for a built-in's name; `a.b` and `a/b` both
    // become `s__a_b`: the first one listed keeps it.
    let s = server("s", &["s__clock"]);
    let admitted = s.admit(vec![
        tool("clock"),
        tool("a.b"),
        tool("a/b"),
        tool("ok"),
        tool(&"x".repeat(70)),
    ]);
    assert_eq!(
        admitted.keys().map(String::as_str).collect::<Vec<_>>(),
        ["a.b", "ok"]
    );
    assert_eq!(admitted["a.b"].model_name, "s__a_b");
}

#[test]
fn max_tools_bounds_the_list() {
    let mut config = McpServerConfig::stdio(vec!["unused".into()]);
    config.max_tools = 2;
    let s = McpServer::new(
        "s".into(),
        config,
        PathBuf::new(),
        Arc::new(|_: &str| None),
        Arc::default(),
    );
    let admitted = s.admit(vec![tool("a"), tool("b"), tool("c")]);
    assert_eq!(admitted.len(), 2);
}

#[test]
fn two_servers_cannot_offer_the_same_model_name() {
    // `a` + `_b` and `a_` + `b` are both `a___b`.
    let first = server("a", &[]);
    let second = server("a_", &[]);
    for (s, name) in [(&first, "_b"), (&second, "b")] {
        let tools = Arc::new(s.admit(vec![tool(name)]));
        s.publish(|snapshot| {
            snapshot.state = ServerState::Ready;
            snapshot.tools = tools;
        });
    }
    let servers = super::super::McpServers::from_servers([first, second]);
    let listed = servers.list();
    let names: Vec<(&str, Option<&pb::tool_endpoint::Kind>)> = listed
        .tools
        .iter()
        .map(|t| {
            (
                t.name.as_str(),
                t.endpoint.as_ref().and_then(|e| e.kind.as_ref()),
            )
        })
        .collect();
    assert_eq!(
        names,
        [("a___b", Some(&pb::tool_endpoint::Kind::Mcp("a/_b".into())))]
    );
    // Both servers are listed, each with the tool it offers.
    assert_eq!(listed.servers.len(), 2);
}

#[test]
fn the_up_gauge_follows_the_state() {
    let s = server("gauge-test", &[]);
    let up = || {
        parley_grpc::telemetry::metrics()
            .mcp_server_up
            .with_label_values(&["gauge-test"])
            .get()
    };
    assert_eq!(up(), 0);
    s.publish(|snapshot| snapshot.state = ServerState::Ready);
    assert_eq!(up(), 1);
    s.publish(|snapshot| snapshot.state = ServerState::Down);
    assert_eq!(up(), 0);
}
