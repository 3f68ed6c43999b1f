//! The built-in tools: `current_time` and `calculator`.
//!
//! Both are safe by construction (they read the clock or evaluate
//! arithmetic, nothing else) and report their stages as progress, so the
//! scripted demo shows a real tool round with progress events.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{
    CallContext, FailureReason, LocalTool, ProgressSender, ToolFailure, ToolOutput, ToolSource,
    calculator, clock,
};

/// Every built-in tool.
pub fn all() -> Vec<Arc<dyn LocalTool>> {
    vec![Arc::new(CurrentTime), Arc::new(Calculator)]
}

/// A local tool (a built-in, or one registered by an embedder) as a
/// turn's tool source.
#[derive(Debug, Clone)]
pub struct LocalSource(pub Arc<dyn LocalTool>);

#[async_trait::async_trait]
impl ToolSource for LocalSource {
    fn is_remote(&self) -> bool {
        false
    }

    async fn call(
        &self,
        _name: &str,
        input: &Value,
        ctx: CallContext,
        progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure> {
        self.0.run(input.clone(), ctx, progress).await
    }
}

/// `current_time`: the date and time at a UTC offset.
#[derive(Debug, Clone, Copy)]
pub struct CurrentTime;

#[async_trait::async_trait]
impl LocalTool for CurrentTime {
    fn name(&self) -> &str {
        "current_time"
    }

    fn description(&self) -> &str {
        "Returns the current date, time and weekday (RFC 3339) at a UTC offset such as +02:00; UTC when no offset is given."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "utc_offset": {
                    "type": "string",
                    "description": "Offset from UTC, like +02:00, -05:30 or Z.",
                    "maxLength": 8
                }
            },
            "additionalProperties": false
        })
    }

    async fn run(
        &self,
        input: Value,
        _ctx: CallContext,
        progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure> {
        let offset_text = input
            .get("utc_offset")
            .and_then(Value::as_str)
            .unwrap_or("Z")
            .to_owned();
        progress
            .report(
                "reading_clock",
                format!("Reading the clock at UTC offset {offset_text}"),
                Some(0.5),
            )
            .await;
        let offset = clock::parse_offset(&offset_text)
            .map_err(|error| ToolFailure::new(FailureReason::InvalidInput, error.to_string()))?;
        Ok(ToolOutput {
            text: clock::now(offset),
            payload: None,
            attachments: Vec::new(),
        })
    }
}

/// `calculator`: evaluates an arithmetic expression.
#[derive(Debug, Clone, Copy)]
pub struct Calculator;

#[async_trait::async_trait]
impl LocalTool for Calculator {
    fn name(&self) -> &str {
        "calculator"
    }

    fn description(&self) -> &str {
        "Evaluates an arithmetic expression with + - * / ^ (power) and parentheses, for example (120000 + 98000) / 2."
    }

    fn input_schema(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "description": "The expression, using numbers, + - * / ^ and parentheses.",
                    "minLength": 1,
                    "maxLength": calculator::MAX_EXPRESSION_LEN
                }
            },
            "required": ["expression"],
            "additionalProperties": false
        })
    }

    async fn run(
        &self,
        input: Value,
        _ctx: CallContext,
        progress: ProgressSender,
    ) -> Result<ToolOutput, ToolFailure> {
        let expression = input
            .get("expression")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        progress
            .report("evaluating", format!("Evaluating {expression}"), Some(0.5))
            .await;
        let value = calculator::evaluate(&expression).map_err(|error| {
            ToolFailure::new(
                FailureReason::ToolError,
                format!("cannot evaluate `{expression}`: {error}"),
            )
        })?;
        Ok(ToolOutput {
            text: format!("{expression} = {}", calculator::format_number(value)),
            payload: None,
            attachments: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::sync::mpsc;

    use super::*;

    fn ctx() -> CallContext {
        CallContext {
            call_id: "c1".into(),
            conversation_id: String::new(),
            user_id: String::new(),
            user_issuer: String::new(),
            tenant: String::new(),
            context: None,
            timeout: Duration::from_secs(1),
        }
    }

    #[tokio::test]
    async fn calculator_reports_progress_and_the_result() {
        let (tx, mut rx) = mpsc::channel(4);
        let out = Calculator
            .run(
                json!({"expression": "6 * 7"}),
                ctx(),
                ProgressSender::new(3, tx),
            )
            .await;
        assert_eq!(out.map(|o| o.text), Ok("6 * 7 = 42".to_owned()));
        let (index, progress) = rx.recv().await.expect("should succeed");
        assert_eq!((index, progress.stage.as_str()), (3, "evaluating"));
    }

    #[tokio::test]
    async fn calculator_errors_are_tool_errors() {
        let (tx, _rx) = mpsc::channel(4);
        let out = Calculator
            .run(
                json!({"expression": "1/0"}),
                ctx(),
                ProgressSender::new(0, tx),
            )
            .await;
        assert_eq!(out.map_err(|f| f.reason), Err(FailureReason::ToolError));
    }

    #[tokio::test]
    async fn current_time_rejects_zone_names() {
        let (tx, _rx) = mpsc::channel(4);
        let ok = CurrentTime
            .run(
                json!({"utc_offset": "+02:00"}),
                ctx(),
                ProgressSender::new(0, tx.clone()),
            )
            .await;
        assert!(ok.expect("should succeed").text.contains("+02:00 ("));
        let bad = CurrentTime
            .run(
                json!({"utc_offset": "Mars/Olympus"}),
                ctx(),
                ProgressSender::new(0, tx),
            )
            .await;
        assert_eq!(bad.map_err(|f| f.reason), Err(FailureReason::InvalidInput));
    }
}
