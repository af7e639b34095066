//! Leader election (src/k8s/leader.rs) against a real kube-apiserver: of
//! two candidates exactly one leads; a leader that dies is replaced once
//! its lease runs out; a leader that shuts down releases the Lease and the
//! other takes it at once. Timings are client-go's scaled down (lease 4 s,
//! renew deadline 3 s, retry 0.5 s) so the test takes seconds.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use partita::k8s::leader::{LeaseConfig, Watchdog, lead};
use partita::k8s::metrics::Metrics;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

fn config(name: &str, identity: &str) -> LeaseConfig {
    LeaseConfig {
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_millis(500),
        ..LeaseConfig::new("default", name, identity)
    }
}

/// A candidate whose work counts itself among the leaders while it runs
/// and records that it led.
struct Candidate {
    task: JoinHandle<Result<Option<()>, partita::k8s::leader::LostLease>>,
    stop: Option<oneshot::Sender<()>>,
    led: Arc<AtomicUsize>,
}

fn candidate(
    client: &kube::Client,
    name: &str,
    identity: &str,
    leaders: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
) -> Candidate {
    let (stop, stopped) = oneshot::channel::<()>();
    let led = Arc::new(AtomicUsize::new(0));
    let led_in = led.clone();
    let client = client.clone();
    let config = config(name, identity);
    let task = tokio::spawn(async move {
        let metrics = Metrics::new();
        let watchdog = Watchdog::default();
        lead(
            client,
            &config,
            &metrics,
            &watchdog,
            async move {
                let _ = stopped.await;
            },
            || async move {
                led_in.fetch_add(1, Ordering::SeqCst);
                let now = leaders.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // Work until dropped; the guard counts us out.
                struct Out(Arc<AtomicUsize>);
                impl Drop for Out {
                    fn drop(&mut self) {
                        self.0.fetch_sub(1, Ordering::SeqCst);
                    }
                }
                let _out = Out(leaders);
                std::future::pending::<()>().await
            },
        )
        .await
    });
    Candidate {
        task,
        stop: Some(stop),
        led,
    }
}

async fn holder(api: &Api<Lease>, name: &str) -> String {
    api.get_opt(name)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .unwrap_or_default()
}

async fn wait_for_holder(api: &Api<Lease>, name: &str, want: &str, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if holder(api, name).await == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{want} did not take {name} within {within:?} (holder: {:?})",
            holder(api, name).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leads_a_dead_leader_is_replaced_and_a_released_lease_is_taken_at_once() {
    let Some(h) = support::kube::harness() else {
        return;
    };
    let client = support::kube::client(h).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    let leaders = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));

    // Two candidates: exactly one leads, for several renewals.
    let name = "leader-test";
    let mut a = candidate(&client, name, "a", leaders.clone(), most.clone());
    let mut b = candidate(&client, name, "b", leaders.clone(), most.clone());
    let start = Instant::now();
    while leaders.load(Ordering::SeqCst) == 0 {
        assert!(start.elapsed() < Duration::from_secs(10), "nobody leads");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(leaders.load(Ordering::SeqCst), 1);
    assert_eq!(most.load(Ordering::SeqCst), 1, "two led at once");
    let first = holder(&api, name).await;
    let (leader, follower, follower_id) = if first == "a" {
        (&mut a, &mut b, "b")
    } else {
        (&mut b, &mut a, "a")
    };
    assert_eq!(leader.led.load(Ordering::SeqCst), 1);
    assert_eq!(follower.led.load(Ordering::SeqCst), 0);
    let lease = api.get(name).await.unwrap().spec.unwrap();
    assert_eq!(lease.lease_duration_seconds, Some(4));
    assert!(lease.acquire_time.is_some() && lease.renew_time.is_some());
    // Renewals happened: renewTime moved past acquireTime.
    assert!(lease.renew_time.unwrap().0 > lease.acquire_time.unwrap().0);

    // The leader dies without a word (its task aborted): the follower takes
    // over once the lease has run out as it observed it, that is within the
    // lease duration plus one jittered retry after the last renewal.
    leader.task.abort();
    let _ = (&mut leader.task).await;
    let took = wait_for_holder(&api, name, follower_id, Duration::from_secs(10)).await;
    assert!(
        took >= Duration::from_secs(2),
        "the follower took a live lease after {took:?}"
    );
    while follower.led.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let lease = api.get(name).await.unwrap().spec.unwrap();
    assert_eq!(lease.lease_transitions, Some(1));

    // A third candidate waits; the leader shuts down and releases: the
    // waiting one takes the lease at once, long before 4 s.
    let mut c = candidate(&client, name, "c", leaders.clone(), most.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(holder(&api, name).await, follower_id);
    let _ = follower.stop.take().unwrap().send(());
    let result = (&mut follower.task).await.unwrap();
    assert!(matches!(result, Ok(None)), "{result:?}");
    // A jittered retry is at most 1.1 s; waiting out the lease would be 4 s
    // or more.
    let took = wait_for_holder(&api, name, "c", Duration::from_secs(4)).await;
    assert!(
        took < Duration::from_millis(3000),
        "a released lease waited {took:?}"
    );
    assert_eq!(most.load(Ordering::SeqCst), 1, "two led at once");
    let _ = c.stop.take().unwrap().send(());
    let _ = (&mut c.task).await;
    assert_eq!(holder(&api, name).await, "", "not released on shutdown");
}

/// A leader whose lease is taken behind its back (someone writes the
/// Lease) stops within the renew deadline and says it lost the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_lease_is_taken_returns_lost() {
    let Some(h) = support::kube::harness() else {
        return;
    };
    let client = support::kube::client(h).await;
    let api: Api<Lease> = Api::namespaced(client.clone(), "default");
    let leaders = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let name = "leader-stolen";
    let mut a = candidate(&client, name, "a", leaders.clone(), most.clone());
    wait_for_holder(&api, name, "a", Duration::from_secs(5)).await;
    // Another writer takes the lease with a long duration.
    let mut lease = api.get(name).await.unwrap();
    let spec = lease.spec.as_mut().unwrap();
    spec.holder_identity = Some("thief".into());
    spec.lease_duration_seconds = Some(3600);
    spec.renew_time = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    api.replace(name, &Default::default(), &lease)
        .await
        .unwrap();
    let start = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(8), &mut a.task)
        .await
        .expect("the leader did not notice")
        .unwrap();
    let err = result.unwrap_err();
    assert!(err.to_string().contains("lost the leader lease"), "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(6),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(leaders.load(Ordering::SeqCst), 0, "work not stopped");
    assert_eq!(
        holder(&api, name).await,
        "thief",
        "released another's lease"
    );
}
