//! Parley's wire contracts, generated from `proto/` at build time.
//!
//! One module per versioned package. Services use these types only at their
//! edges and convert to domain types inside (see each service's `convert`
//! module); [`json`] is the one conversion between `serde_json` and
//! `google.protobuf.Struct` / `Value`.

#![allow(clippy::all, missing_docs)]

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
