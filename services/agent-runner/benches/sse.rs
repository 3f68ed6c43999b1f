//! Server-sent-events framing, the runner's first step on every provider
//! chunk (`provider::sse::sse_events`).
//!
//! The body is an OpenAI-compatible stream as `parley-load mock` and real
//! servers send it: a role chunk, 20 content chunks, the finish chunk, the
//! usage chunk and `[DONE]`, each `data:` line about 200 bytes.
//! - `openai_24_events/one_read_each`: every event in its own network read,
//!   as a streamed answer arrives on loopback;
//! - `openai_24_events/one_read`: the whole body in one read (a fast
//!   provider, or a replayed answer);
//! - `openai_24_events/byte_by_byte`: one read per byte, the worst split.
//!
//! Throughput is in events: what framing costs per provider chunk.

use std::convert::Infallible;

use agent_runner::provider::{http::ResponseLimits, sse::sse_events};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;

/// Content chunks between the role chunk and the finish.
const CONTENT_CHUNKS: usize = 20;

fn chunk(delta: &str, finish: &str) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion.chunk\",\
         \"created\":1741570283,\"model\":\"gpt-4o-2024-08-06\",\"service_tier\":\"default\",\
         \"system_fingerprint\":\"fp_eb9dce56a8\",\"choices\":[{{\"index\":0,\"delta\":{delta},\
         \"logprobs\":null,\"finish_reason\":{finish}}}]}}\n\n"
    )
}

/// The stream's events, one string each.
fn events() -> Vec<String> {
    let mut events = vec![chunk(r#"{"role":"assistant","content":""}"#, "null")];
    events.extend((0..CONTENT_CHUNKS).map(|_| chunk(r#"{"content":"word "}"#, "null")));
    events.push(chunk("{}", "\"stop\""));
    events.push(
        "data: {\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion.chunk\",\
         \"created\":1741570283,\"model\":\"gpt-4o-2024-08-06\",\"choices\":[],\"usage\":\
         {\"prompt_tokens\":50,\"completion_tokens\":20,\"total_tokens\":70}}\n\n"
            .to_owned(),
    );
    events.push("data: [DONE]\n\n".to_owned());
    events
}

fn frame(rt: &tokio::runtime::Runtime, reads: Vec<Vec<u8>>) -> usize {
    rt.block_on(async {
        let reads = futures::stream::iter(reads.into_iter().map(Ok::<_, Infallible>));
        sse_events(reads, ResponseLimits::DEFAULT)
            .map(|event| event.map(|event| event.data.len()).unwrap_or_default())
            .fold(0, |sum, len| async move { sum + len })
            .await
    })
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let events = events();
    let body: Vec<u8> = events.concat().into_bytes();
    let mut group = c.benchmark_group("openai_24_events");
    group.throughput(Throughput::Elements(events.len() as u64));
    let each: Vec<Vec<u8>> = events.iter().map(|e| e.as_bytes().to_vec()).collect();
    group.bench_function("one_read_each", |b| {
        b.iter_batched(
            || each.clone(),
            |reads| frame(&rt, reads),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("one_read", |b| {
        b.iter_batched(
            || vec![body.clone()],
            |reads| frame(&rt, reads),
            BatchSize::SmallInput,
        )
    });
    let bytes: Vec<Vec<u8>> = body.iter().map(|b| vec![*b]).collect();
    group.bench_function("byte_by_byte", |b| {
        b.iter_batched(
            || bytes.clone(),
            |reads| frame(&rt, reads),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(sse_benches, benches);
criterion_main!(sse_benches);
