//! Server reflection lists what the binary serves, and only that: the
//! descriptor set holds every Parley service, but a parser must not
//! advertise the gateway's API (grpcurl would list it and then get
//! UNIMPLEMENTED). Both reflection versions, and `describe` still resolves.
//! It also describes the `google.rpc` error details every status carries.

use parley_grpc::ServeOptions;
use tokio::sync::oneshot;
use tonic_reflection::pb::{v1, v1alpha};

async fn channel(addr: std::net::SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("url")
        .connect()
        .await
        .expect("connect")
}

async fn list_v1(addr: std::net::SocketAddr) -> Vec<String> {
    let mut client = v1::server_reflection_client::ServerReflectionClient::new(channel(addr).await);
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let mut responses = client
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection v1")
        .into_inner();
    let response = responses.message().await.expect("a response").expect("one");
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        response.message_response
    else {
        panic!("not a service list: {response:?}")
    };
    let mut names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    names.sort();
    names
}

async fn v1alpha_describes(addr: std::net::SocketAddr, symbol: &str) -> (Vec<String>, bool) {
    let mut client =
        v1alpha::server_reflection_client::ServerReflectionClient::new(channel(addr).await);
    let requests = [
        v1alpha::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(
                v1alpha::server_reflection_request::MessageRequest::ListServices(String::new()),
            ),
        },
        v1alpha::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(
                v1alpha::server_reflection_request::MessageRequest::FileContainingSymbol(
                    symbol.to_owned(),
                ),
            ),
        },
    ];
    let mut responses = client
        .server_reflection_info(tokio_stream::iter(requests))
        .await
        .expect("reflection v1alpha")
        .into_inner();
    let mut names = Vec::new();
    let mut described = false;
    while let Some(response) = responses.message().await.expect("a response") {
        match response.message_response {
            Some(v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(
                list,
            )) => names = list.service.into_iter().map(|s| s.name).collect(),
            Some(v1alpha::server_reflection_response::MessageResponse::FileDescriptorResponse(
                files,
            )) => described = !files.file_descriptor_proto.is_empty(),
            other => panic!("unexpected reflection answer: {other:?}"),
        }
    }
    names.sort();
    (names, described)
}

#[tokio::test]
async fn reflection_lists_only_the_served_services() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let options = ServeOptions::new("test", vec!["parley.parser.v1.PayloadParser"]);
    let server = tokio::spawn(parley_grpc::serve(
        listener,
        tonic::service::Routes::default(),
        options,
        async move {
            let _ = stopped.await;
        },
    ));

    assert_eq!(
        list_v1(addr).await,
        [
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "parley.parser.v1.PayloadParser",
        ]
    );
    let (names, described) = v1alpha_describes(addr, "parley.parser.v1.PayloadParser").await;
    assert_eq!(
        names,
        [
            "grpc.health.v1.Health",
            "grpc.reflection.v1alpha.ServerReflection",
            "parley.parser.v1.PayloadParser",
        ]
    );
    assert!(described, "describe must still resolve the served service");

    let _ = stop.send(());
    server.await.expect("join").expect("serves and stops");
}

/// Asks reflection v1 for `request`; returns the names of the files it
/// answers with, or the error it gives.
async fn v1_files(
    addr: std::net::SocketAddr,
    request: v1::server_reflection_request::MessageRequest,
) -> Result<Vec<String>, String> {
    use prost::Message as _;

    let mut client = v1::server_reflection_client::ServerReflectionClient::new(channel(addr).await);
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(request),
    };
    let mut responses = client
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .expect("reflection v1")
        .into_inner();
    // tonic-reflection ends the stream with a status for an unknown symbol
    // or file; the protocol also allows an `ErrorResponse` message.
    let response = match responses.message().await {
        Ok(response) => response.expect("one"),
        Err(status) => return Err(status.message().to_owned()),
    };
    match response.message_response {
        Some(v1::server_reflection_response::MessageResponse::FileDescriptorResponse(files)) => {
            Ok(files
                .file_descriptor_proto
                .iter()
                .map(|bytes| {
                    prost_types::FileDescriptorProto::decode(bytes.as_slice())
                        .expect("a file descriptor")
                        .name()
                        .to_owned()
                })
                .collect())
        }
        Some(v1::server_reflection_response::MessageResponse::ErrorResponse(error)) => {
            Err(error.error_message)
        }
        other => panic!("unexpected reflection answer: {other:?}"),
    }
}

/// grpcurl decodes the details of an error status by asking reflection for
/// each detail's type, then for the files that type's file imports: every
/// detail type Parley sends must resolve, under the canonical file names.
#[tokio::test]
async fn reflection_describes_the_error_details_of_every_status() {
    use v1::server_reflection_request::MessageRequest::{FileByFilename, FileContainingSymbol};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (stop, stopped) = oneshot::channel::<()>();
    let options = ServeOptions::new("test", vec!["parley.parser.v1.PayloadParser"]);
    let server = tokio::spawn(parley_grpc::serve(
        listener,
        tonic::service::Routes::default(),
        options,
        async move {
            let _ = stopped.await;
        },
    ));

    for detail in ["ErrorInfo", "BadRequest", "RetryInfo"] {
        let symbol = format!("google.rpc.{detail}");
        assert_eq!(
            v1_files(addr, FileContainingSymbol(symbol.clone())).await,
            Ok(vec!["google/rpc/error_details.proto".to_owned()]),
            "{symbol}"
        );
    }
    assert_eq!(
        v1_files(addr, FileContainingSymbol("google.rpc.Status".into())).await,
        Ok(vec!["google/rpc/status.proto".to_owned()])
    );
    // The imports of those files (RetryInfo's Duration, Status's Any).
    for import in [
        "google/protobuf/duration.proto",
        "google/protobuf/any.proto",
    ] {
        assert_eq!(
            v1_files(addr, FileByFilename(import.into())).await,
            Ok(vec![import.to_owned()])
        );
    }
    // The control: a type nobody registered is not found.
    assert!(
        v1_files(addr, FileContainingSymbol("google.rpc.NoSuchDetail".into()))
            .await
            .is_err()
    );
    // The error model adds types, not services.
    assert_eq!(
        list_v1(addr).await,
        [
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "parley.parser.v1.PayloadParser",
        ]
    );

    let _ = stop.send(());
    server.await.expect("join").expect("serves and stops");
}
