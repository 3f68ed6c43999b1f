//! Compiles `proto/` with protox (pure Rust, no system `protoc`) and
//! generates prost types plus tonic clients and servers into `OUT_DIR`.
//! The encoded descriptor set is written too, for server reflection.

use std::{env, fs, path::PathBuf};

use prost::Message;

const FILES: &[&str] = &[
    "parley/parser/v1/payloads.proto",
    "parley/parser/v1/parser.proto",
    "parley/tools/v1/tools.proto",
    "parley/runner/v1/runner.proto",
    "parley/gateway/v1/gateway.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    for file in FILES {
        println!("cargo:rerun-if-changed={}", root.join(file).display());
    }
    let fds = protox::compile(FILES, [&root])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    fs::write(out.join("parley_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
