//! The `payload-parser` service: the `parley-parse` library served as the
//! stateless `parley.parser.v1.PayloadParser` gRPC service ([`service`]),
//! its settings ([`config`]) and its assembly ([`app`]). The binary and the
//! tests that call the real service start it from here; the parsing itself
//! is the library's.

pub mod app;
pub mod config;
pub mod service;
