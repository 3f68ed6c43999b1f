//! Parley's wire contracts, generated from `proto/` at build time.
//!
//! One module per versioned package. Services use these types only at their
//! edges and convert to domain types inside (see each service's `convert`
//! module); [`json`] is the one conversion between `serde_json` and
//! `google.protobuf.Struct` / `Value`.

#![allow(clippy::all, missing_docs)]

pub mod codec;
pub mod json;

/// `parley.parser.v1`: the payload parser and the typed elements it produces.
pub mod parser {
    pub mod v1 {
        tonic::include_proto!("parley.parser.v1");
    }
}

/// `parley.tools.v1`: the service applications implement to expose tools.
pub mod tools {
    pub mod v1 {
        tonic::include_proto!("parley.tools.v1");
    }
}

/// `parley.runner.v1`: the agent runner's LLM tool loop.
pub mod runner {
    pub mod v1 {
        tonic::include_proto!("parley.runner.v1");
    }
}

/// `parley.gateway.v1`: the client-facing chat API.
pub mod gateway {
    pub mod v1 {
        tonic::include_proto!("parley.gateway.v1");
    }
}

/// The encoded `FileDescriptorSet` of every Parley proto, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/parley_descriptor.bin"));

/// The encoded `FileDescriptorSet` of the `google.rpc` error model
/// (`google/rpc/status.proto`, `google/rpc/error_details.proto`): served by
/// reflection beside [`FILE_DESCRIPTOR_SET`] so that grpcurl and other
/// reflection clients decode the `ErrorInfo`, `BadRequest` and `RetryInfo`
/// details of a Parley error instead of printing opaque bytes.
pub const GOOGLE_RPC_FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/google_rpc_descriptor.bin"));
