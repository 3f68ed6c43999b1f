//! Compiles `proto/` with protox (pure Rust, no system `protoc`) and
//! generates prost types plus tonic clients and servers into `OUT_DIR`.
//! The encoded descriptor set is written too, for server reflection, and a
//! second one of the `google.rpc` error model (`third_party/google/rpc`,
//! the files tonic-types generates its types from) so reflection can also
//! describe the error details every Parley status carries.

use std::{env, fs, path::PathBuf};

use prost::Message;

const FILES: &[&str] = &[
    "parley/parser/v1/payloads.proto",
    "parley/parser/v1/parser.proto",
    "parley/tools/v1/tools.proto",
    "parley/runner/v1/runner.proto",
    "parley/gateway/v1/gateway.proto",
];

/// The `google.rpc` files under `third_party/`, by their canonical names.
const GOOGLE_RPC_FILES: &[&str] = &["google/rpc/status.proto", "google/rpc/error_details.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?);
    let root = manifest.join("../../proto");
    let third_party = manifest.join("third_party");
    for file in FILES {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    for file in GOOGLE_RPC_FILES {
        println!(
            "cargo:rerun-if-changed={}",
            third_party.join(file).display()
        );
    }
    let out = PathBuf::from(env::var("OUT_DIR")?);
    let google_rpc = protox::compile(GOOGLE_RPC_FILES, [&third_party])?;
    fs::write(
        out.join("google_rpc_descriptor.bin"),
        google_rpc.encode_to_vec(),
    )?;
    let fds = protox::compile(FILES, [&root])?;
    fs::write(out.join("parley_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Small first buffers per call (src/codec.rs).
        .codec_path("crate::codec::LeanCodec")
        // A oneof is as large as its largest variant, and every event of a
        // stream pays that size wherever it is queued or kept (a turn's
        // journal, a follower's queue, the channels between tasks): the
        // variants that come once per turn or per tool call are boxed, so
        // a text delta's event is about 90 bytes instead of 300 to 530.
        .boxed(".parley.gateway.v1.ChatEvent.event.complete")
        .boxed(".parley.gateway.v1.ChatEvent.event.tool_complete")
        .boxed(".parley.gateway.v1.ChatEvent.event.payload_partial")
        .boxed(".parley.runner.v1.RunEvent.event.tool_complete")
        .boxed(".parley.runner.v1.RunEvent.event.finished")
        .boxed(".parley.parser.v1.ParseStreamResponse.output.final")
        .boxed(".parley.parser.v1.ParseStreamResponse.output.custom_payload")
        .compile_fds(fds)?;
    Ok(())
}
