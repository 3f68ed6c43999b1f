//! The gateway for browsers and web front ends, on the gRPC listener.
//!
//! Every RPC also answers gRPC-Web and the Connect protocol (JSON and
//! binary), translated to gRPC in process by [`parley_web`] before the
//! telemetry, authentication and limits every gRPC call goes through: a
//! browser calls `ChatGateway` with `fetch`, a Connect or gRPC-Web client
//! in any language works, and nothing behind the listener knows the
//! difference. CORS allows the origins in `web.allowed_origins` (none by
//! default). Plain HTTP routes sit next to the gRPC ones on the same
//! listener ([`routes`]): the chat page of `web/` ([`page`]) and the AI
//! SDK's UI message stream ([`ui_stream`]).

pub mod page;
pub mod ui_stream;

use std::sync::Arc;

use parley_grpc::HttpLayer;
use parley_web::{ConnectLimits, Methods, Web, WebError};

use crate::{auth::Authenticator, config::WebConfig, engine::Engine};

/// The listener's web layer: CORS for `config.allowed_origins`, gRPC-Web,
/// and Connect for every RPC of `service` and of health (server reflection
/// is a bidirectional stream, which web protocols over HTTP/1.1 cannot
/// carry).
pub fn layer(config: &WebConfig, service: &str) -> Result<HttpLayer, WebError> {
    let methods = Methods::new(
        &[
            parley_proto::FILE_DESCRIPTOR_SET,
            parley_proto::GOOGLE_RPC_FILE_DESCRIPTOR_SET,
            parley_grpc::serve::HEALTH_FILE_DESCRIPTOR_SET,
        ],
        &[service, parley_grpc::serve::HEALTH_SERVICE],
    )?;
    let limits = ConnectLimits {
        max_request_bytes: config.max_request_bytes,
    };
    Ok(Web::new(methods, limits, &config.allowed_origins)?.layer())
}

/// The gRPC routes with the gateway's plain HTTP routes beside them: the
/// chat page under `/ui/` when `web.enabled`, and the AI SDK's UI message
/// stream ([`ui_stream`]).
pub fn routes(
    grpc: tonic::service::Routes,
    config: &WebConfig,
    engine: Arc<Engine>,
    auth: Arc<Authenticator>,
) -> tonic::service::Routes {
    let mut router = grpc
        .into_axum_router()
        .merge(ui_stream::routes(engine, auth));
    if config.enabled {
        router = router.merge(page::routes());
    }
    tonic::service::Routes::from(router)
}
