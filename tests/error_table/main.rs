//! The "Errors" table of docs/clients.md and the error lists in the proto
//! service comments are exact: every refusal the three services build (each error
//! type's variants, turned into a `Status` the way the services do, and the
//! reasons the code passes as literals) is listed with the same gRPC code,
//! and everything listed is a refusal the code builds.

use std::collections::{BTreeMap, BTreeSet};

use agent_runner::{error::RunError, turn::Violation};
use chat_gateway::{auth::AuthError, error::GatewayError};
use parley_grpc::status;
use payload_parser::service as parser;
use tonic::{Code, Status};

/// The gateway's `INVALID_ARGUMENT` reasons, passed as literals to
/// `GatewayError::invalid` / `GatewayError::InvalidArgument`.
const GATEWAY_INVALID: &[&str] = &[
    "EMPTY_MESSAGE",
    "MESSAGE_TOO_LARGE",
    "INVALID_ID",
    "INVALID_MODEL",
    "INVALID_RESPONSE_SCHEMA",
    "SCHEMA_TOO_LARGE",
    "STATE_TOO_LARGE",
    "MISSING_CONVERSATION_ID",
    "MISSING_ACTION",
    "INVALID_ACTION_PARAMS",
    "INVALID_PAGE_TOKEN",
    "INVALID_CLIENT_TOOL",
    "INVALID_DECISIONS",
    "INVALID_TOOL_ARGUMENTS",
    "MODEL_NOT_ALLOWED",
    "INVALID_ATTACHMENT",
    "ATTACHMENT_TYPE_NOT_ALLOWED",
    "ATTACHMENT_TOO_LARGE",
    "UPLOAD_EXPIRED",
    "INVALID_TITLE",
    "INVALID_METADATA",
    "INVALID_QUERY",
];

/// Every refusal the code builds: `(service, reason, code)`.
fn built() -> Vec<(&'static str, String, Code)> {
    let mut statuses: Vec<(&str, Status)> = Vec::new();
    for reason in GATEWAY_INVALID {
        statuses.push(("gateway", GatewayError::invalid(reason, "f", "bad").into()));
    }
    for error in [
        GatewayError::ConversationNotFound,
        GatewayError::TurnNotFound,
        GatewayError::TurnInProgress {
            turn_id: "t".into(),
        },
        GatewayError::TurnNotAwaitingInput {
            turn_id: "t".into(),
        },
        GatewayError::TurnAwaitingInput {
            turn_id: "t".into(),
        },
        GatewayError::TooManyTurns,
        GatewayError::TooManyStreams,
        GatewayError::SlowConsumer {
            stall: std::time::Duration::from_secs(30),
        },
        GatewayError::OverQuota(chat_gateway::store::quota::QuotaExceeded {
            scope: chat_gateway::store::quota::Scope::User,
            limit: chat_gateway::store::quota::Limit::ConcurrentTurns,
            max: 4,
            retry_after: std::time::Duration::from_secs(1),
        }),
        GatewayError::UnknownAction("a".into()),
        GatewayError::ClientAction("a".into()),
        GatewayError::ActionNotOnPage {
            action: "a".into(),
            page: "p".into(),
        },
        GatewayError::ActionTemplate("t".into()),
        GatewayError::AttachmentNotFound,
        GatewayError::AttachmentQuota {
            setting: "per_user_bytes",
            limit: 1,
        },
        GatewayError::NoModelForTenant {
            tenant: "t".into(),
            page: "p".into(),
        },
        GatewayError::Store(chat_gateway::store::StoreError::UnsupportedUrl(
            "mysql".into(),
        )),
    ] {
        statuses.push(("gateway", error.into()));
    }
    for error in [
        AuthError::MissingToken,
        AuthError::InvalidToken,
        AuthError::Expired,
        AuthError::NoCaller,
    ] {
        statuses.push(("gateway", error.into()));
    }
    for error in [
        RunError::Invalid(vec![Violation {
            field: "messages".into(),
            description: "required".into(),
        }]),
        RunError::UnknownProvider {
            field: "model.provider".into(),
            provider: "p".into(),
            configured: vec![],
        },
        RunError::StructuredOutputUnsupported {
            provider: "p".into(),
            model: "m".into(),
        },
        RunError::Busy,
        RunError::ToolEndpointNotAllowed { tool: "t".into() },
        RunError::AttachmentUnsupported {
            provider: "p".into(),
            model: "m".into(),
            kind: "image",
            media_type: "image/png".into(),
        },
        RunError::ModelNotAllowed {
            field: "model".into(),
            model: "p/m".into(),
        },
    ] {
        statuses.push(("runner", error.into()));
    }
    for reason in [
        parley_grpc::bearer::MISSING_TOKEN,
        parley_grpc::bearer::INVALID_TOKEN,
    ] {
        statuses.push(("runner", parley_grpc::bearer::refusal(reason)));
    }
    for reason in [
        parser::TEXT_TOO_LARGE,
        parser::UNKNOWN_PROFILE,
        parser::INVALID_PROFILE,
        parser::PROFILE_REQUIRED,
        parser::PROFILE_ALREADY_SET,
    ] {
        statuses.push((
            "parser",
            status::invalid_argument(reason, vec![("f".into(), "bad".into())]),
        ));
    }
    statuses.push((
        "parser",
        status::error(Code::DeadlineExceeded, parser::STREAM_TIMEOUT, "late"),
    ));
    statuses.push(("all", status::malformed_message(Some("page"), "bad")));
    statuses.push(("all", status::request_too_large(Some(2), 1)));
    // The gateway's web protocols (parley-web's Connect translation).
    statuses.push(("gateway", status::unsupported_encoding("content-encoding")));
    statuses
        .into_iter()
        .map(|(service, status)| {
            let reason = status::reason(&status).expect("every refusal has an ErrorInfo");
            (service, reason, status.code())
        })
        .collect()
}

/// The docs/clients.md table: `(service, reason)` → the code's name.
fn readme_table() -> BTreeMap<(String, String), String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/clients.md");
    let text = std::fs::read_to_string(&path).expect("docs/clients.md");
    let section = text
        .split("\n## Errors\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .expect("an Errors section");
    let mut table = BTreeMap::new();
    for line in section.lines().filter(|line| line.starts_with("| ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let [_, service, reasons, code, ..] = cells.as_slice() else {
            continue;
        };
        if *service == "service" {
            continue;
        }
        for reason in reasons.split(',') {
            let previous = table.insert(
                (
                    (*service).to_owned(),
                    reason.trim().trim_matches('`').to_owned(),
                ),
                code.trim_matches('`').to_owned(),
            );
            assert!(previous.is_none(), "{reason} is listed twice for {service}");
        }
    }
    table
}

fn code_name(code: Code) -> &'static str {
    parley_grpc::codes::code_name(code as i32)
}

#[test]
fn the_readme_lists_every_reason_with_its_code() {
    let table = readme_table();
    let built = built();
    let mut problems = Vec::new();
    for (service, reason, code) in &built {
        match table.get(&((*service).to_owned(), reason.clone())) {
            None => problems.push(format!(
                "{service} {reason} is not in the docs/clients.md table"
            )),
            Some(listed) if listed != code_name(*code) => problems.push(format!(
                "{service} {reason}: docs/clients.md says {listed}, the code answers {}",
                code_name(*code)
            )),
            Some(_) => {}
        }
    }
    let known: BTreeSet<(String, String)> = built
        .iter()
        .map(|(service, reason, _)| ((*service).to_owned(), reason.clone()))
        .collect();
    for key in table.keys() {
        if !known.contains(key) {
            problems.push(format!(
                "docs/clients.md lists {key:?}, which no code builds"
            ));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// The `Errors:` list of a proto service comment: reason → the code's name.
fn proto_errors(file: &str) -> BTreeMap<String, String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../proto")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("proto file");
    let mut errors = BTreeMap::new();
    let mut code = None;
    for line in text.lines() {
        if let Some(entry) = line.strip_prefix("//     ") {
            let code: &String = code.as_ref().expect("a continuation after a code");
            for reason in entry.split(',').map(str::trim).filter(|r| !r.is_empty()) {
                errors.insert(reason.to_owned(), code.clone());
            }
        } else if let Some((name, reasons)) = line
            .strip_prefix("//   ")
            .and_then(|entry| entry.split_once(": "))
        {
            code = Some(name.to_owned());
            for reason in reasons.split(',').map(str::trim).filter(|r| !r.is_empty()) {
                errors.insert(reason.to_owned(), name.to_owned());
            }
        } else {
            code = None;
        }
    }
    errors
}

#[test]
fn each_proto_service_lists_its_reasons_with_their_codes() {
    let built = built();
    for (service, file) in [
        ("gateway", "parley/gateway/v1/gateway.proto"),
        ("runner", "parley/runner/v1/runner.proto"),
        ("parser", "parley/parser/v1/parser.proto"),
    ] {
        let expected: BTreeMap<String, String> = built
            .iter()
            .filter(|(owner, _, _)| *owner == service || *owner == "all")
            .map(|(_, reason, code)| (reason.clone(), code_name(*code).to_owned()))
            .collect();
        assert_eq!(proto_errors(file), expected, "{file}");
    }
}
