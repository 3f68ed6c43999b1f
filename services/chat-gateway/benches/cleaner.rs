//! What cleaning a streamed answer costs the gateway, per turn, with the
//! real payload-parser sidecar (the binary, on loopback): a `ParseStream`
//! opened, 20 deltas pushed and handed out, the final parse.
//!
//! - `plain`: 20 deltas of prose (`"word "`), which pass the sidecar
//!   (`Profile::pass_through`): shown at once, sent to it in one request
//!   at the end;
//! - `round_trips`: the same with a colon in each delta (`"word: "`),
//!   which the sidecar must decide: a round trip per delta, as every delta
//!   took before pass-through.
//!
//! The ratio of the two, in one run, is what pass-through saves; a change
//! that stops plain text passing shows as `plain` ≈ `round_trips`.
//!
//! `cargo bench -p chat-gateway --bench cleaner`

use std::time::Duration;

use chat_gateway::{
    clients::Upstreams,
    registry::{PageRef, Registry},
    turn::cleaner::TextCleaner,
};
use criterion::{Criterion, criterion_group, criterion_main};

const DELTAS: usize = 20;

/// One turn's answer through a new cleaner; the bytes handed out.
async fn turn(
    upstreams: &Upstreams,
    profile: &parley_proto::parser::v1::ParseProfile,
    delta: &str,
) -> usize {
    let mut cleaner = TextCleaner::open(upstreams, profile.clone()).await;
    let mut shown = 0;
    for _ in 0..DELTAS {
        cleaner.push(delta).await;
        shown += cleaner.take_ready().len();
    }
    cleaner.sync().await;
    shown += cleaner.take_ready().len();
    let done = cleaner.finish().await;
    assert!(done.fallback.is_none(), "the sidecar answered");
    shown + done.response.message.len()
}

fn cleaner(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    // The clients' channels are made inside the runtime.
    let _entered = runtime.enter();
    let sidecar = runtime.block_on(parley_testkit::sidecar::ParserSidecar::start::<_, &str>([]));
    let upstreams = Upstreams::new(
        "http://127.0.0.1:9",
        &sidecar.url(),
        Duration::from_secs(2),
        Duration::from_secs(2),
        &parley_grpc::tls::ClientTls::default(),
    )
    .expect("valid urls");
    let profile = Registry::example()
        .resolve(&PageRef::new("tables_list", "", ""))
        .parse_profile();
    let mut group = c.benchmark_group("cleaner");
    for (name, delta) in [("plain", "word "), ("round_trips", "word: ")] {
        group.bench_function(name, |b| {
            b.iter(|| runtime.block_on(turn(&upstreams, &profile, delta)));
        });
    }
    group.finish();
    drop(sidecar);
}

criterion_group!(benches, cleaner);
criterion_main!(benches);
