use super::*;
use bus::{Bus, BusOptions, Subscription, SystemClock};

/// How long a test waits for an event that must come.
pub(crate) const NET: Duration = Duration::from_secs(20);

/// A store over a real bus and sled (the approval tests here and the `exec` ones in tools).
pub(crate) struct Fx {
    dir: tempfile::TempDir,
    db: sled::Db,
    pub(crate) bus: Arc<dyn Bus>,
    pub(crate) approvals: Approvals,
}

pub(crate) async fn fx() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let db = sled::open(dir.path().join("db")).unwrap();
    let bus = bus::open(BusOptions::default(), db.clone()).unwrap().bus;
    let approvals = Approvals::open(&db, bus.clone(), Arc::new(SystemClock)).unwrap();
    Fx {
        dir,
        db,
        bus,
        approvals,
    }
}

fn request(timeout: Duration) -> ApprovalRequest {
    ApprovalRequest {
        agent: "coder".into(),
        session: "s1".into(),
        command: "touch made".into(),
        argv: vec!["touch".into(), "made".into()],
        task_id: None,
        rule: "touch made".into(),
        timeout,
    }
}

impl Fx {
    pub(crate) async fn events(&self) -> Subscription {
        self.bus
            .subscribe(Topic::parse("approvals.>").unwrap())
            .await
            .unwrap()
    }
}

/// The next approval event: (`event`, record).
pub(crate) async fn next(sub: &mut Subscription) -> (String, ApprovalRecord) {
    let d = tokio::time::timeout(NET, sub.next())
        .await
        .expect("an approval event")
        .expect("the subscription is open");
    let p = &d.envelope().payload;
    assert_eq!(d.envelope().topic.as_str(), "approvals.coder");
    (
        p["event"].as_str().unwrap().to_string(),
        serde_json::from_value(p["approval"].clone()).unwrap(),
    )
}

#[actix_rt::test]
async fn an_answer_reaches_the_waiter_and_is_recorded() {
    let f = fx().await;
    let mut sub = f.events().await;
    let waiter = tokio::spawn({
        let a = f.approvals.clone();
        async move { a.ask(request(NET)).await }
    });
    let (event, rec) = next(&mut sub).await;
    assert_eq!(
        (event.as_str(), rec.state),
        ("requested", ApprovalState::Pending)
    );
    assert_eq!(
        f.approvals.list().unwrap(),
        std::slice::from_ref(&rec),
        "listed while pending"
    );
    let answered = f.approvals.resolve(&rec.id, true, false).await.unwrap();
    assert_eq!(answered.state, ApprovalState::Allowed);
    assert_eq!(
        waiter.await.unwrap().unwrap(),
        Answer::Allowed { always: false }
    );
    assert_eq!(next(&mut sub).await.0, "allowed");
    let again = f.approvals.resolve(&rec.id, false, false).await;
    assert!(
        matches!(
            again,
            Err(ApprovalError::Settled {
                state: ApprovalState::Allowed,
                ..
            })
        ),
        "{again:?}"
    );
    assert!(f.approvals.rules("coder").unwrap().is_empty(), "not always");
    assert!(matches!(
        f.approvals.resolve("nope", true, false).await,
        Err(ApprovalError::NotFound(_))
    ));
}

#[actix_rt::test]
async fn no_answer_in_time_is_a_denial_and_the_request_expires() {
    let f = fx().await;
    let mut sub = f.events().await;
    let answer = f
        .approvals
        .ask(request(Duration::from_millis(100)))
        .await
        .unwrap();
    assert_eq!(answer, Answer::TimedOut);
    let (_, rec) = next(&mut sub).await;
    assert_eq!(next(&mut sub).await.0, "expired");
    let stored = f.approvals.get(&rec.id).unwrap().unwrap();
    assert_eq!(stored.state, ApprovalState::Expired);
    assert!(matches!(
        f.approvals.resolve(&rec.id, true, true).await,
        Err(ApprovalError::Settled {
            state: ApprovalState::Expired,
            ..
        })
    ));
    assert!(f.approvals.rules("coder").unwrap().is_empty());
}

#[actix_rt::test]
async fn requests_left_pending_by_an_earlier_run_expire_on_open() {
    let f = fx().await;
    let mut sub = f.events().await;
    let waiter = tokio::spawn({
        let a = f.approvals.clone();
        async move { a.ask(request(NET)).await }
    });
    let (_, rec) = next(&mut sub).await;
    waiter.abort();
    let reopened = Approvals::open(&f.db, f.bus.clone(), Arc::new(SystemClock)).unwrap();
    assert_eq!(
        reopened.get(&rec.id).unwrap().unwrap().state,
        ApprovalState::Expired
    );
    drop(f.dir);
}
