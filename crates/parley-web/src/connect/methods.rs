//! The RPCs Connect may call, from the descriptor set the listener already
//! serves for reflection, and the two codecs: binary messages pass as they
//! are, JSON ones are proto3 JSON read and written through
//! `prost-reflect`'s dynamic messages.

use std::collections::HashMap;

use prost::Message as _;
use prost_reflect::{
    DescriptorPool, DeserializeOptions, DynamicMessage, MessageDescriptor, SerializeOptions,
};
use tonic::Code;

use super::ConnectError;
use crate::WebError;

/// One RPC: its messages and its kind.
#[derive(Debug, Clone)]
pub struct Method {
    /// The request message.
    pub input: MessageDescriptor,
    /// The response message.
    pub output: MessageDescriptor,
    /// Whether the client sends a stream.
    pub client_streaming: bool,
    /// Whether the server answers with a stream.
    pub server_streaming: bool,
}

impl Method {
    /// Whether the RPC is unary (one message each way).
    pub fn is_unary(&self) -> bool {
        !self.client_streaming && !self.server_streaming
    }
}

/// The RPCs by their path (`/package.Service/Method`), and the descriptors
/// of every message they and their errors' details use.
#[derive(Debug, Clone)]
pub struct Methods {
    by_path: HashMap<String, Method>,
    pool: DescriptorPool,
}

impl Methods {
    /// The RPCs of `services` (full names), described by the encoded
    /// descriptor sets `sets` (the well-known types need not be in them).
    pub fn new(sets: &[&[u8]], services: &[&str]) -> Result<Self, WebError> {
        let mut pool = DescriptorPool::global();
        for set in sets {
            pool.decode_file_descriptor_set(*set)
                .map_err(|error| WebError::Descriptors(error.to_string()))?;
        }
        let mut by_path = HashMap::new();
        for name in services {
            let service = pool.get_service_by_name(name).ok_or_else(|| {
                WebError::Descriptors(format!("no service `{name}` in the descriptor sets"))
            })?;
            for method in service.methods() {
                by_path.insert(
                    format!("/{}/{}", service.full_name(), method.name()),
                    Method {
                        input: method.input(),
                        output: method.output(),
                        client_streaming: method.is_client_streaming(),
                        server_streaming: method.is_server_streaming(),
                    },
                );
            }
        }
        Ok(Self { by_path, pool })
    }

    /// The RPC at `path`.
    pub fn get(&self, path: &str) -> Option<&Method> {
        self.by_path.get(path)
    }

    /// How many RPCs there are.
    pub fn len(&self) -> usize {
        self.by_path.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_path.is_empty()
    }

    /// Every descriptor known (for error details' `debug`).
    pub fn pool(&self) -> &DescriptorPool {
        &self.pool
    }
}

/// A Connect codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Codec {
    /// proto3 JSON.
    Json,
    /// The binary protobuf encoding, as gRPC carries it.
    Proto,
}

impl Codec {
    /// The request's message (in this codec) as protobuf bytes.
    pub fn to_proto(
        self,
        descriptor: &MessageDescriptor,
        body: bytes::Bytes,
    ) -> Result<bytes::Bytes, ConnectError> {
        match self {
            Codec::Proto => Ok(body),
            Codec::Json => {
                // An empty body is the empty message (as `{}`), which is
                // what a `curl -d ''` means.
                let json: &[u8] = if body.iter().all(u8::is_ascii_whitespace) {
                    b"{}"
                } else {
                    &body
                };
                // serde_json bounds nesting (128 levels) before any of it
                // is built; unknown fields are ignored, as Connect's own
                // servers do, so clients built from newer protos still call.
                let mut reader = serde_json::Deserializer::from_slice(json);
                let message = DynamicMessage::deserialize_with_options(
                    descriptor.clone(),
                    &mut reader,
                    &DeserializeOptions::new().deny_unknown_fields(false),
                )
                .and_then(|message| reader.end().map(|()| message))
                .map_err(|error| {
                    ConnectError::malformed(format!(
                        "the request is not a {} in proto3 JSON: {error}",
                        descriptor.full_name()
                    ))
                })?;
                Ok(message.encode_to_vec().into())
            }
        }
    }

    /// A response message (protobuf bytes) in this codec.
    pub fn from_proto(
        self,
        descriptor: &MessageDescriptor,
        message: bytes::Bytes,
    ) -> Result<bytes::Bytes, ConnectError> {
        match self {
            Codec::Proto => Ok(message),
            Codec::Json => {
                let internal = |what: String| {
                    tracing::error!(message = descriptor.full_name(), %what, "cannot write a response as JSON");
                    ConnectError::new(Code::Internal, "the response cannot be written as JSON")
                };
                let decoded = DynamicMessage::decode(descriptor.clone(), message)
                    .map_err(|error| internal(error.to_string()))?;
                let mut json = Vec::with_capacity(128);
                let mut writer = serde_json::Serializer::new(&mut json);
                decoded
                    .serialize_with_options(&mut writer, &SerializeOptions::new())
                    .map_err(|error| internal(error.to_string()))?;
                Ok(json.into())
            }
        }
    }
}
