//! The in-process figures: the durable bus's throughput and the disk's fdatasync floor.

use super::REQUEST;
use bus::{Bus, Envelope, LocalBus, LocalOptions, Outcome, RequestId, Topic};
use serde_json::json;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Tasks per second through the embedded bus (sled store, dedup ledger, group commit): each task
/// submitted with its own request id, delivered, started and completed; 256 in flight.
pub(super) fn bus_throughput(base: &Path, tasks: usize) -> f64 {
    let dir = tempfile::tempdir_in(base).unwrap();
    let path = dir.path().to_path_buf();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        actix_rt::System::with_tokio_rt(move || rt).block_on(async move {
            let bus = LocalBus::open(&path, LocalOptions::default()).unwrap();
            let mut sub = bus.consume(Topic::parse("bench.>").unwrap()).await.unwrap();
            tokio::spawn(async move {
                while let Some(d) = sub.next().await {
                    tokio::spawn(async move {
                        d.start().await.unwrap();
                        let result = d.envelope().payload.clone();
                        d.complete(Outcome::Succeeded { result }).await.unwrap();
                    });
                }
            });
            let topic = Topic::parse("bench.tasks").unwrap();
            let sem = Arc::new(tokio::sync::Semaphore::new(256));
            let started = Instant::now();
            let mut joins = Vec::with_capacity(tasks);
            for i in 0..tasks {
                let permit = sem.clone().acquire_owned().await.unwrap();
                let (bus, topic) = (bus.clone(), topic.clone());
                joins.push(tokio::spawn(async move {
                    let env = Envelope::task(
                        topic,
                        RequestId::parse(&format!("bench-{i}")).unwrap(),
                        json!(i),
                    );
                    bus.request(env, REQUEST).await.unwrap();
                    drop(permit);
                }));
            }
            for j in joins {
                j.await.unwrap();
            }
            tasks as f64 / started.elapsed().as_secs_f64()
        })
    })
    .join()
    .unwrap()
}

/// Times `n` 4 KiB writes each followed by `fdatasync`, in a file under `base`.
pub(super) fn fdatasync_floor(base: &Path, n: usize) -> Vec<Duration> {
    let path = base.join("fsync-probe");
    let mut f = std::fs::File::create(&path).unwrap();
    let block = [7u8; 4096];
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f.write_all(&block).unwrap();
            f.sync_data().unwrap();
            t.elapsed()
        })
        .collect()
}
