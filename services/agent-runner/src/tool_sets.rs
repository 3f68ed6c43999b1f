//! Tool sets shared by the turns that declare the same tools.
//!
//! A gateway sends its page's tools with every turn, and the turns of a page
//! mostly send the same ones. Converting them (each input schema a
//! `serde_json::Value` tree, then serialized again to find its compiled
//! validator) cost every turn CPU, and each running turn kept its own copy
//! of the trees for as long as it streamed. A set is kept here, prepared,
//! by the bytes of its declarations, at most [`CAPACITY`] sets, the oldest
//! forgotten first; a turn that declares a kept set points at it.
//!
//! A set with an MCP tool is never kept: its description and schema come
//! from the server's current tool list, which changes while the runner runs.

use std::sync::Arc;

use parley_parse::CompiledCache;
use parley_proto::runner::v1::{self as pb, tool_endpoint::Kind};
use prost::Message;

use crate::{
    convert::request::tool_defs,
    tools::{ToolRuntime, prepare::TurnTools},
    turn::Violation,
};

/// The most distinct tool sets kept.
pub const CAPACITY: usize = 256;

/// Prepared tool sets by their declarations' bytes.
#[derive(Debug)]
pub struct ToolSets {
    kept: CompiledCache<TurnTools>,
}

impl Default for ToolSets {
    fn default() -> Self {
        Self {
            kept: CompiledCache::new(CAPACITY),
        }
    }
}

impl ToolSets {
    /// `declared`, checked and bound (see [`TurnTools::prepare`]): the kept
    /// set when the same declarations were prepared before, else prepared
    /// now and kept when valid and free of MCP tools. Every problem is a
    /// field violation (`tools[i].…`).
    pub fn prepare(
        &self,
        declared: Vec<pb::ToolDefinition>,
        runtime: &ToolRuntime,
    ) -> Result<Arc<TurnTools>, Vec<Violation>> {
        let key = key(&declared);
        let prepare = || TurnTools::prepare(tool_defs(declared)?, runtime);
        match key {
            Some(key) => self.kept.get_or_compile(&key, prepare),
            None => prepare().map(Arc::new),
        }
    }

    /// How many sets are kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether none are.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

/// The bytes a set is kept by: its declarations, each length-delimited, in
/// order. `None` for a set that is not kept (none, or one with an MCP tool).
fn key(declared: &[pb::ToolDefinition]) -> Option<Vec<u8>> {
    let mcp = |tool: &pb::ToolDefinition| {
        matches!(
            tool.endpoint.as_ref().and_then(|e| e.kind.as_ref()),
            Some(Kind::Mcp(_))
        )
    };
    if declared.is_empty() || declared.iter().any(mcp) {
        return None;
    }
    let len = declared
        .iter()
        .map(Message::encoded_len)
        .map(|len| len + prost::length_delimiter_len(len))
        .sum();
    let mut key = Vec::with_capacity(len);
    for tool in declared {
        tool.encode_length_delimited(&mut key).ok()?;
    }
    Some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin(name: &str, builtin: &str) -> pb::ToolDefinition {
        pb::ToolDefinition {
            name: name.into(),
            endpoint: Some(pb::ToolEndpoint {
                kind: Some(Kind::Builtin(builtin.into())),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn turns_that_declare_the_same_tools_share_one_prepared_set() {
        let sets = ToolSets::default();
        let runtime = ToolRuntime::with_builtins();
        let declared = || vec![builtin("add", "calculator"), builtin("now", "current_time")];
        let first = sets.prepare(declared(), &runtime).expect("valid tools");
        let second = sets.prepare(declared(), &runtime).expect("valid tools");
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(first.names(), ["add", "now"]);
        let other = sets
            .prepare(vec![builtin("add", "calculator")], &runtime)
            .expect("valid tools");
        assert!(!Arc::ptr_eq(&first, &other));
        assert_eq!(sets.len(), 2);
    }

    #[test]
    fn invalid_tools_are_reported_and_not_kept() {
        let sets = ToolSets::default();
        let runtime = ToolRuntime::with_builtins();
        for _ in 0..2 {
            let violations = sets
                .prepare(
                    vec![builtin("add", "calculator"), builtin("add", "current_time")],
                    &runtime,
                )
                .expect_err("a name declared twice");
            assert_eq!(violations[0].field, "tools[1].name");
        }
        let violations = sets
            .prepare(vec![builtin("x", "no-such-tool")], &runtime)
            .expect_err("an unknown built-in");
        assert_eq!(violations[0].field, "tools[0].endpoint.builtin");
        assert!(sets.is_empty());
    }

    #[test]
    fn sets_with_an_mcp_tool_or_no_tools_are_not_kept() {
        let mcp = pb::ToolDefinition {
            name: "search".into(),
            endpoint: Some(pb::ToolEndpoint {
                kind: Some(Kind::Mcp("docs/search".into())),
            }),
            ..Default::default()
        };
        assert_eq!(key(&[builtin("add", "calculator"), mcp]), None);
        assert_eq!(key(&[]), None);
        let one = key(&[builtin("add", "calculator")]).expect("kept");
        let two =
            key(&[builtin("add", "calculator"), builtin("now", "current_time")]).expect("kept");
        assert!(two.starts_with(&one) && two.len() > one.len());
        let empty = ToolSets::default()
            .prepare(Vec::new(), &ToolRuntime::with_builtins())
            .expect("no tools is valid");
        assert!(empty.is_empty());
    }
}
