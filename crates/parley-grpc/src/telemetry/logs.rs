//! Log lines: JSON by default (one object per line, for log pipelines),
//! human-readable with `--log-format text`.
//!
//! A JSON line carries `timestamp`, `level`, `target`, `message`, the
//! event's own fields, and the correlation fields of the spans it happened
//! in: `conversation_id` and `turn_id` (from any enclosing span that has
//! `gen_ai.conversation.id` / `parley.turn.id`), and `trace_id` / `span_id`
//! when tracing is on. Span fields are otherwise not repeated on every line,
//! so span attributes (model names, token counts) never bloat the logs.

use std::fmt;

use opentelemetry::trace::TraceContextExt;
use serde_json::{Map, Value};
use tracing::{
    Event, Subscriber,
    field::{Field, Visit},
    span,
};
use tracing_subscriber::{
    Layer,
    field::RecordFields,
    fmt::{
        FmtContext, FormatEvent, FormatFields,
        format::Writer,
        time::{FormatTime, SystemTime},
    },
    layer::Context,
    registry::LookupSpan,
};

use super::semconv;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// One JSON object per line.
    #[default]
    Json,
    /// Human-readable lines.
    Text,
}

impl std::str::FromStr for LogFormat {
    type Err = String;
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "json" => Ok(Self::Json),
            "text" => Ok(Self::Text),
            other => Err(format!(
                "unknown log format `{other}` (expected `json` or `text`)"
            )),
        }
    }
}

/// The correlation ids a span carries, kept in its extensions.
#[derive(Debug, Default, Clone)]
struct Correlation {
    conversation_id: Option<String>,
    turn_id: Option<String>,
}

impl Visit for Correlation {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            semconv::GEN_AI_CONVERSATION_ID if !value.is_empty() => {
                self.conversation_id = Some(value.to_owned())
            }
            semconv::PARLEY_TURN_ID if !value.is_empty() => self.turn_id = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if matches!(
            field.name(),
            semconv::GEN_AI_CONVERSATION_ID | semconv::PARLEY_TURN_ID
        ) {
            self.record_str(field, &format!("{value:?}"));
        }
    }
}

/// Remembers the correlation ids of spans that have them.
///
/// Install it [`filtered`](CorrelationLayer::filtered): unfiltered, a layer
/// wants every span, so every span of every library (h2 opens trace-level
/// spans around each frame it reads or writes) would be created in the
/// registry and closed again, whatever the log level: about 9.5 % of the
/// gateway's CPU under load.
#[derive(Debug, Default)]
pub struct CorrelationLayer;

/// Whether a callsite is a span that declares a correlation field.
fn declares_ids(meta: &tracing::Metadata<'_>) -> bool {
    meta.is_span()
        && (meta
            .fields()
            .field(semconv::GEN_AI_CONVERSATION_ID)
            .is_some()
            || meta.fields().field(semconv::PARLEY_TURN_ID).is_some())
}

impl CorrelationLayer {
    /// The layer, asked only about spans that declare `gen_ai.conversation.id`
    /// or `parley.turn.id` (decided once per callsite).
    pub fn filtered<S>() -> impl Layer<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        Self.with_filter(tracing_subscriber::filter::filter_fn(declares_ids))
    }
}

impl<S> Layer<S> for CorrelationLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut ids = Correlation::default();
        attrs.record(&mut ids);
        if (ids.conversation_id.is_some() || ids.turn_id.is_some())
            && let Some(span) = ctx.span(id)
        {
            span.extensions_mut().insert(ids);
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        let mut ids = Correlation::default();
        values.record(&mut ids);
        if ids.conversation_id.is_none() && ids.turn_id.is_none() {
            return;
        }
        if let Some(span) = ctx.span(id) {
            let mut extensions = span.extensions_mut();
            match extensions.get_mut::<Correlation>() {
                Some(known) => {
                    known.conversation_id = ids.conversation_id.or(known.conversation_id.take());
                    known.turn_id = ids.turn_id.or(known.turn_id.take());
                }
                None => extensions.insert(ids),
            }
        }
    }
}

/// Formats span fields as nothing: JSON lines take only the correlation ids
/// from spans, so the fmt layer need not render every span's fields.
#[derive(Debug, Default)]
pub struct NoSpanFields;

impl<'w> FormatFields<'w> for NoSpanFields {
    fn format_fields<R: RecordFields>(&self, _writer: Writer<'w>, _fields: R) -> fmt::Result {
        Ok(())
    }
}

/// The event's fields as JSON values.
struct JsonFields<'a>(&'a mut Map<String, Value>);

impl Visit for JsonFields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().to_owned(), Value::from(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name().starts_with("log.") {
            return; // tracing-log's bookkeeping fields
        }
        self.0
            .insert(field.name().to_owned(), Value::from(format!("{value:?}")));
    }
}

/// The JSON line format.
#[derive(Debug, Default)]
pub struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let mut line = Map::new();
        let mut timestamp = String::new();
        SystemTime.format_time(&mut Writer::new(&mut timestamp))?;
        line.insert("timestamp".into(), Value::from(timestamp));
        let meta = event.metadata();
        line.insert("level".into(), Value::from(meta.level().as_str()));
        line.insert("target".into(), Value::from(meta.target()));
        event.record(&mut JsonFields(&mut line));

        let mut ids = Correlation::default();
        if let Some(scope) = ctx.event_scope() {
            for span in scope {
                if let Some(found) = span.extensions().get::<Correlation>() {
                    ids.conversation_id = ids.conversation_id.or(found.conversation_id.clone());
                    ids.turn_id = ids.turn_id.or(found.turn_id.clone());
                }
                if ids.conversation_id.is_some() && ids.turn_id.is_some() {
                    break;
                }
            }
            if let Some(leaf) = ctx.lookup_current() {
                line.insert("span".into(), Value::from(leaf.name()));
            }
        }
        if let Some(id) = ids.conversation_id {
            line.insert("conversation_id".into(), Value::from(id));
        }
        if let Some(id) = ids.turn_id {
            line.insert("turn_id".into(), Value::from(id));
        }
        // With tracing on, entering a span makes its OpenTelemetry context
        // current on this thread.
        let cx = opentelemetry::Context::current();
        let span = cx.span();
        let span_context = span.span_context();
        if span_context.is_valid() {
            line.insert(
                "trace_id".into(),
                Value::from(span_context.trace_id().to_string()),
            );
            line.insert(
                "span_id".into(),
                Value::from(span_context.span_id().to_string()),
            );
        }
        let text = serde_json::to_string(&line).map_err(|_| fmt::Error)?;
        writer.write_str(&text)?;
        writer.write_char('\n')
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex, PoisonError};

    use tracing_subscriber::{Registry, fmt::MakeWriter, layer::SubscriberExt};

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Buffer {
        type Writer = Buffer;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[test]
    fn a_json_line_carries_the_turn_ids_of_its_spans_and_not_their_other_fields() {
        let buffer = Buffer::default();
        let subscriber = Registry::default().with(CorrelationLayer::filtered()).with(
            tracing_subscriber::fmt::layer()
                .fmt_fields(NoSpanFields)
                .event_format(JsonLines)
                .with_writer(buffer.clone()),
        );
        tracing::subscriber::with_default(subscriber, || {
            let turn = tracing::info_span!(
                "turn",
                { semconv::GEN_AI_CONVERSATION_ID } = "c-1",
                { semconv::PARLEY_TURN_ID } = tracing::field::Empty,
                { semconv::GEN_AI_REQUEST_MODEL } = "m-secret-ish",
            );
            turn.record(semconv::PARLEY_TURN_ID, "t-1");
            let _turn = turn.enter();
            let _inner = tracing::info_span!("store.finish_turn").entered();
            tracing::info!(rows = 3_u64, "stored");
        });
        let text = String::from_utf8(buffer.0.lock().expect("lock").clone()).expect("utf-8");
        let line: Value = serde_json::from_str(text.trim()).expect("one JSON object");
        assert_eq!(line["message"], "stored");
        assert_eq!(line["rows"], 3);
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["conversation_id"], "c-1");
        assert_eq!(line["turn_id"], "t-1");
        assert_eq!(line["span"], "store.finish_turn");
        assert!(!text.contains("m-secret-ish"), "{text}");
        // No OpenTelemetry layer here: no trace id to show.
        assert!(line.get("trace_id").is_none(), "{text}");
    }
}
