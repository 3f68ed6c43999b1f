//! Reading JSON text: [`value`] reads a JSON text straight into a
//! `serde_json::Value`, [`extract`] finds where an element embedded in
//! free text closes (resumably, in linear time) and decodes it, and
//! [`swar`] holds the byte searches both use.

pub(crate) mod extract;
pub(crate) mod swar;
pub(crate) mod value;
