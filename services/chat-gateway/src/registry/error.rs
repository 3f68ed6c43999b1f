//! Errors of loading a registry file: every problem names the file, the entry
//! (a dotted path such as `pages.table_view.tabs.rows.tools[1]`) and what is
//! wrong, and validation collects all problems instead of stopping at the
//! first.

/// One problem found in a registry file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The entry, as a dotted path from the file's root (`.` for the root).
    pub entry: String,
    /// What is wrong with it.
    pub message: String,
}

impl Problem {
    pub(crate) fn new(entry: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            entry: entry.into(),
            message: message.into(),
        }
    }
}

/// Why a registry could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The file could not be read.
    #[error("{origin}: cannot read the registry file: {source}")]
    Io {
        /// The file.
        origin: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML or does not have the registry's shape.
    #[error("{origin}: {entry}: {message}")]
    Syntax {
        /// The file.
        origin: String,
        /// Where the parser stopped, as an entry path.
        entry: String,
        /// What the parser reported, with line and column when known.
        message: String,
    },
    /// The file parsed but its content is inconsistent.
    #[error("{}", render_invalid(origin, problems))]
    Invalid {
        /// The file.
        origin: String,
        /// Every problem found, in file order.
        problems: Vec<Problem>,
    },
}

impl RegistryError {
    /// Every problem as `(entry, message)`, for tests and for reporting.
    pub fn problems(&self) -> Vec<Problem> {
        match self {
            Self::Io { source, .. } => vec![Problem::new(".", source.to_string())],
            Self::Syntax { entry, message, .. } => {
                vec![Problem::new(entry.clone(), message.clone())]
            }
            Self::Invalid { problems, .. } => problems.clone(),
        }
    }
}

/// One line per problem, each naming file and entry.
fn render_invalid(origin: &str, problems: &[Problem]) -> String {
    let mut out = format!(
        "{origin}: invalid registry ({} problem{})",
        problems.len(),
        if problems.len() == 1 { "" } else { "s" }
    );
    for p in problems {
        out.push_str(&format!("\n  {origin}: {}: {}", p.entry, p.message));
    }
    out
}
