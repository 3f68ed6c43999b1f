//! The registry's templates (page context templates, payload summary
//! templates, server-action message templates), compiled once at load time
//! so that syntax errors are start-up errors naming the entry.
//!
//! The syntax is Jinja (minijinja): `{{ table.name }}` substitutes a field by
//! its dotted path, `{% for c in columns %}...{% endfor %}` and
//! `{% if filters %}...{% endif %}` handle lists and optional parts, filters
//! such as `length`, `join(", ")`, `default("none")` and `tojson` format
//! values. A template written by an app team gets loops, conditionals and
//! error messages with line numbers from a documented language instead of a
//! home-made subset. Missing fields render as nothing (the UI state is
//! partial by nature), blocks do not leave blank lines behind, and a fuel
//! limit bounds the work one rendering may do, whatever the state holds.

use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, UndefinedBehavior, Value};

/// Why a template could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// No template is registered under this key (a bug, not user input).
    #[error("no template `{0}`")]
    Missing(String),
    /// Rendering failed (a type error, or the fuel ran out).
    #[error("template `{key}` failed: {message}")]
    Render {
        /// The template's key (its entry path).
        key: String,
        /// minijinja's explanation.
        message: String,
    },
}

/// A set of compiled templates keyed by entry path.
pub(crate) struct TemplateSet {
    env: Environment<'static>,
}

impl std::fmt::Debug for TemplateSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&str> = self.env.templates().map(|(name, _)| name).collect();
        names.sort_unstable();
        f.debug_struct("TemplateSet")
            .field("templates", &names)
            .finish()
    }
}

impl TemplateSet {
    /// An empty set whose renderings may each spend at most `fuel`.
    pub fn new(fuel: u64) -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Chainable);
        env.set_fuel(Some(fuel));
        // Only fails on invalid delimiters; the defaults are valid.
        if let Ok(syntax) = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
        {
            env.set_syntax(syntax);
        }
        Self { env }
    }

    /// Compiles `source` under `key`; the error says what and on which line.
    pub fn add(&mut self, key: &str, source: &str) -> Result<(), String> {
        self.env
            .add_template_owned(key.to_owned(), source.to_owned())
            .map_err(describe)
    }

    /// Renders the template `key` with the fields of `vars` as variables.
    pub fn render(&self, key: &str, vars: &serde_json::Value) -> Result<String, TemplateError> {
        self.render_value(key, &Self::vars(vars))
    }

    /// `vars` converted once, for rendering several templates with it.
    pub fn vars(vars: &serde_json::Value) -> Value {
        Value::from(minijinja::value::Serde(vars))
    }

    /// Renders the template `key` with already converted variables.
    pub fn render_value(&self, key: &str, vars: &Value) -> Result<String, TemplateError> {
        let template = self
            .env
            .get_template(key)
            .map_err(|_| TemplateError::Missing(key.to_owned()))?;
        template
            .render(vars.clone())
            .map_err(|e| TemplateError::Render {
                key: key.to_owned(),
                message: describe(e),
            })
    }
}

/// minijinja's error as one line: kind, detail and line number.
fn describe(e: minijinja::Error) -> String {
    let mut out = e.kind().to_string();
    if let Some(detail) = e.detail() {
        out.push_str(": ");
        out.push_str(detail);
    }
    if let Some(line) = e.line() {
        out.push_str(&format!(" (template line {line})"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set(src: &str) -> TemplateSet {
        let mut set = TemplateSet::new(10_000);
        set.add("t", src).expect("compiles");
        set
    }

    #[test]
    fn substitutes_dotted_paths_and_tolerates_missing_fields() {
        let s = set("{{ table.name }}|{{ table.missing.deeper }}|{{ nothing | default('none') }}");
        let out = s
            .render("t", &json!({"table": {"name": "Jobs"}}))
            .expect("renders");
        assert_eq!(out, "Jobs||none");
    }

    #[test]
    fn blocks_leave_no_blank_lines() {
        let s = set("Columns:\n{% for c in columns %}\n- {{ c }}\n{% endfor %}\nEnd");
        let out = s
            .render("t", &json!({"columns": ["a", "b"]}))
            .expect("renders");
        assert_eq!(out, "Columns:\n- a\n- b\nEnd");
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let mut set = TemplateSet::new(10_000);
        let err = set.add("t", "ok\n{{ a. }}").expect_err("must not compile");
        assert!(err.contains("line 2"), "{err}");
        assert!(err.contains("syntax error"), "{err}");
    }

    #[test]
    fn fuel_bounds_rendering_of_large_state() {
        let s = {
            let mut set = TemplateSet::new(500);
            set.add("t", "{% for r in rows %}{{ r }}{% endfor %}")
                .expect("compiles");
            set
        };
        let rows: Vec<u32> = (0..10_000).collect();
        let err = s
            .render("t", &json!({ "rows": rows }))
            .expect_err("runs out of fuel");
        assert!(err.to_string().contains("fuel"), "{err}");
    }

    #[test]
    fn unknown_key_is_reported() {
        let s = TemplateSet::new(10);
        assert!(matches!(
            s.render("nope", &json!({})),
            Err(TemplateError::Missing(_))
        ));
    }
}
