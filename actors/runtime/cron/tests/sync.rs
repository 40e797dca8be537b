//! `[[cron]]` jobs synced into the store: added, updated when changed, disabled when removed;
//! jobs added through the API are left alone.

use super::{Rig, every, ms};
use crate::cron::*;

fn declared(jobs: Vec<JobSpec>) -> Declared {
    Declared {
        jobs,
        heartbeats: vec![],
    }
}

fn file_job(id: &str, message: &str) -> JobSpec {
    let mut sp = every(60_000, ms("2026-01-05T08:00:00Z"));
    sp.id = Some(id.into());
    sp.payload.message = message.into();
    sp
}

#[actix_rt::test]
async fn declared_jobs_are_added_updated_and_disabled_when_removed() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler("s1");
    let api = s
        .add(&every(60_000, ms("2026-01-05T08:00:00Z")))
        .await
        .unwrap();
    let r = s
        .sync_declared(&declared(vec![
            file_job("a--one", "first"),
            file_job("a--two", "second"),
        ]))
        .await;
    let one = JobId::parse("a--one").unwrap();
    let two = JobId::parse("a--two").unwrap();
    assert_eq!(r.added, [one.clone(), two.clone()]);
    assert!(r.errors.is_empty(), "{r:?}");
    let stored = s.store().job(&one).await.unwrap().unwrap();
    assert_eq!(stored.source, JobSource::File);
    // Unchanged: nothing to do.
    let r = s
        .sync_declared(&declared(vec![
            file_job("a--one", "first"),
            file_job("a--two", "second"),
        ]))
        .await;
    assert_eq!(r, SyncReport::default());
    // `one` changed, `two` removed from the file.
    let r = s
        .sync_declared(&declared(vec![file_job("a--one", "first, changed")]))
        .await;
    assert_eq!(r.updated, std::slice::from_ref(&one));
    assert_eq!(r.disabled, std::slice::from_ref(&two));
    let one_job = s.store().job(&one).await.unwrap().unwrap();
    assert_eq!(one_job.payload.message, "first, changed");
    assert_eq!(one_job.created_at, stored.created_at);
    assert!(
        !s.store().job(&two).await.unwrap().unwrap().enabled,
        "kept, disabled"
    );
    let api_job = s.store().job(&api.id).await.unwrap().unwrap();
    assert!(api_job.enabled, "a job added through the API is left alone");
    // Declared again: enabled again.
    let r = s
        .sync_declared(&declared(vec![
            file_job("a--one", "first, changed"),
            file_job("a--two", "second"),
        ]))
        .await;
    assert_eq!(r.updated, std::slice::from_ref(&two));
    assert!(s.store().job(&two).await.unwrap().unwrap().enabled);
}

#[actix_rt::test]
async fn a_declared_id_taken_by_an_api_job_is_an_error_and_the_job_is_kept() {
    let rig = Rig::new("2026-01-05T08:00:00Z").await;
    let s = rig.scheduler("s1");
    let mut sp = every(60_000, ms("2026-01-05T08:00:00Z"));
    sp.id = Some("a--x".into());
    s.add(&sp).await.unwrap();
    let r = s
        .sync_declared(&declared(vec![file_job("a--x", "mine")]))
        .await;
    assert_eq!(r.errors.len(), 1, "{r:?}");
    let job = s
        .store()
        .job(&JobId::parse("a--x").unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.payload.message, "ping");
    assert_eq!(job.source, JobSource::Api);
}
