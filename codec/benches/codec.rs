//! Encode and decode+verify throughput of ~200-byte events, one core.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use stepjournal_codec::record::{self, RecordRef};
use stepjournal_codec::{
    Attempt, CallId, Event, Limits, OutputChunk, Seq, SessionId, Stamped, UnixMillis, batch,
};

const EVENTS: usize = 1000;

fn events() -> Vec<Stamped> {
    (0..EVENTS)
        .map(|i| {
            let e: Event = OutputChunk {
                call: CallId::from(format!("call-{i:04}")),
                attempt: Attempt(1),
                text: "x".repeat(140),
            }
            .into();
            Stamped::at(UnixMillis(1_750_000_000_000 + i as u64), e)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let session = SessionId::new("session-0001").unwrap();
    let limits = Limits::default();
    let events = events();
    let mut one = Vec::new();
    let size =
        record::encode_into(&mut one, &session, Seq(0), events[0].at, &events[0].event, &limits)
            .unwrap();
    let mut group = c.benchmark_group(format!("record_{size}B"));
    group.throughput(Throughput::Elements(EVENTS as u64));
    let mut buf = Vec::with_capacity(EVENTS * 256);
    group.bench_function("encode", |b| {
        b.iter(|| {
            buf.clear();
            for (i, e) in events.iter().enumerate() {
                record::encode_into(&mut buf, &session, Seq(i as u64), e.at, &e.event, &limits)
                    .unwrap();
            }
            black_box(buf.len())
        })
    });
    let mut encoded = Vec::new();
    for (i, e) in events.iter().enumerate() {
        record::encode_into(&mut encoded, &session, Seq(i as u64), e.at, &e.event, &limits)
            .unwrap();
    }
    group.bench_function("decode_verify", |b| {
        b.iter(|| {
            let mut at = 0;
            let mut n = 0;
            while at < encoded.len() {
                let (r, len) = RecordRef::parse(&encoded[at..], &limits).unwrap();
                black_box(r.event().unwrap());
                at += len;
                n += 1;
            }
            n
        })
    });
    let mut frame = Vec::new();
    batch::encode_into(&mut frame, &session, Seq(0), &events, &limits).unwrap();
    group.bench_function("batch_decode_verify", |b| {
        b.iter(|| black_box(batch::decode(&frame, &limits).unwrap().0.len()))
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
