//! The active worker on a Kubernetes cluster: each tick reads new jobs and
//! requests from PostgreSQL, what the cluster shows of their pods (a
//! reflector of the pods Partita made, and one of the nodes), lets
//! `kube::KubeWorld` decide, makes the pods it asks for, and writes the
//! changes in one transaction, as the virtual cluster's worker does.
//!
//! Each team's work runs in the namespace named after the team, under the
//! cluster-scoped Queue of the same name, which the worker keeps equal to
//! the team's quota in the database (admins edit quotas in the portal; the
//! scheduler reads Queues).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::Utc;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use partita_engine::sched::{Phase, Team};
use sqlx::{Connection, PgConnection};
use tokio::sync::watch;

use super::kube::{Action, KubeWorld, NodeFacts, PodTemplate};
use super::views::{self, Publisher, Rows, ViewJob};
use super::{Options, clock, store};
use crate::api;
use crate::k8s::jobs::{group_name, job_id};
use crate::k8s::names::{ANNOTATION_ESTIMATED_RUNTIME, DEFAULT_QUEUE, LABEL_QUEUE};
use crate::k8s::node::{NodeOptions, view_node};
use crate::k8s::pod::{annotations_of, class_of, duration_annotation, labels_of, task_of};
use crate::k8s::resources::{PodGroup, Queue, QueueSpec};
use crate::k8s::snapshot::{Objects, SnapshotError, SnapshotOptions, build_snapshot};
use crate::k8s::workloads::{LABEL_JOB_ID, LABEL_MANAGED_BY, MANAGED_BY};

/// How the worker reaches the cluster and what its pods run.
#[derive(Clone)]
pub struct KubeOptions {
    /// How to reach the API server. The worker makes its client on its
    /// own runtime (a client's background task lives on the runtime that
    /// made it).
    pub config: kube::Config,
    /// The container image and command of every task (the job spec names
    /// none yet, so one per installation) and the scheduler's name.
    pub template: PodTemplate,
    /// Time between ticks.
    pub tick: Duration,
}

impl std::fmt::Debug for KubeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeOptions")
            .field("template", &self.template)
            .field("tick", &self.tick)
            .finish_non_exhaustive()
    }
}

const FIELD_MANAGER: &str = "partita-worker";

/// Starts a reflector of `api` and returns its store once it has listed.
async fn reflect<K>(api: Api<K>, config: watcher::Config) -> Store<K>
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    tokio::spawn(async move {
        stream
            .for_each(|r| async move {
                if let Err(e) = r {
                    tracing::warn!(error = %e, "worker: watching the cluster");
                }
            })
            .await;
    });
    let _ = reader.wait_until_ready().await;
    reader
}

/// The active worker's life on a cluster: recover, then tick until
/// stopped.
pub async fn active(
    mut conn: PgConnection,
    opt: &Options,
    k: &KubeOptions,
    stopped: &mut watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let client = kube::Client::try_from(k.config.clone()).context("a Kubernetes client")?;
    store::become_active(&mut conn, &opt.id).await?;
    store::seed_teams(&mut conn, &opt.scenario.teams).await?;
    let (epoch, _) = clock::load(&mut conn).await?;
    // A real cluster's time is the wall clock's, also while no worker
    // runs: cluster time is the time since the epoch, at speed 1.
    let since_epoch = (Utc::now() - epoch).num_nanoseconds().unwrap_or(0);
    let clock = clock::Clock::new(epoch, since_epoch, 1.0);
    let managed = format!("{LABEL_MANAGED_BY}={MANAGED_BY}");
    let pods = reflect(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default().labels(&managed),
    )
    .await;
    let nodes = reflect(Api::<Node>::all(client.clone()), watcher::Config::default()).await;
    // Pods people made for Partita's scheduler, and what names their team.
    let theirs = reflect(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default()
            .fields(&format!("spec.schedulerName={}", k.template.scheduler_name))
            .labels(&format!("{LABEL_MANAGED_BY}!={MANAGED_BY}")),
    )
    .await;
    // Every unfinished pod, of any scheduler: what holds the nodes' GPUs,
    // for the portal's cluster view.
    let live = reflect(
        Api::<Pod>::all(client.clone()),
        watcher::Config::default().fields("status.phase!=Succeeded,status.phase!=Failed"),
    )
    .await;
    let queues = reflect(
        Api::<Queue>::all(client.clone()),
        watcher::Config::default(),
    )
    .await;
    let groups = reflect(
        Api::<PodGroup>::all(client.clone()),
        watcher::Config::default(),
    )
    .await;
    let mut world = KubeWorld::default();
    let mut since = store::xmin(&mut conn).await?;
    let unfinished = store::unfinished_jobs(&mut conn, epoch).await?;
    tracing::info!(
        jobs = unfinished.len(),
        "worker: on Kubernetes, recovered from the database"
    );
    for rec in unfinished {
        world.add(rec);
    }
    let mut cluster = Cluster {
        client,
        namespaces: BTreeSet::new(),
        queues: Vec::new(),
    };
    let mut publisher = Publisher::views_only();
    loop {
        let mut tx = conn.begin().await?;
        let teams = store::teams(&mut tx).await?;
        cluster.sync_queues(&teams).await;
        let mark = store::xmin(&mut tx).await?;
        let arrived = cluster_jobs(&theirs, &queues, &groups);
        let known = world.cluster_jobs();
        for job in arrived
            .values()
            .filter(|j| !known.contains_key(&j.stored.cluster_job))
        {
            if !job.live {
                continue; // finished before the worker saw it
            }
            match store::adopt_cluster_job(&mut tx, &job.stored).await? {
                store::Adopted::Stored(id) => {
                    tracing::info!(job = %id, cluster_job = %job.stored.cluster_job, team = %job.stored.team, "worker: a job arrived on the cluster")
                }
                store::Adopted::Known => {}
                store::Adopted::NoTeam => tracing::debug!(
                    cluster_job = %job.stored.cluster_job, team = %job.stored.team,
                    "worker: a cluster job of a team the database does not have; left out"
                ),
            }
        }
        for rec in store::new_jobs(&mut tx, clock.epoch, since).await? {
            if !world.knows(rec.seq) {
                world.add(rec);
            }
        }
        since = mark;
        let now = clock.now();
        let mut by_job = pods_by_job(&pods);
        for (cluster_job, id) in world.cluster_jobs() {
            if let Some(job) = arrived.get(&cluster_job) {
                by_job.insert(id, job.pods.clone());
            }
        }
        let facts = node_facts(&nodes);
        let mut actions = Vec::new();
        for r in store::requests(&mut tx).await? {
            if !world.knows(r.seq) {
                continue;
            }
            let act = if let Some(by) = &r.cancel_by {
                world.cancel(r.seq, by, now, &by_job, &facts)
            } else if let Some(by) = &r.requeue_by {
                world.requeue(r.seq, by, now, &by_job, &facts)
            } else {
                None
            };
            actions.extend(act);
        }
        actions.extend(world.observe(now, &by_job, &facts, &k.template));
        for a in actions {
            if let Err((seq, e)) = cluster.apply(a).await {
                tracing::warn!(
                    job = seq,
                    error = format!("{e:#}"),
                    "worker: the cluster refused"
                );
                world.create_failed(seq, now, &format!("{e:#}"));
            }
        }
        let changes = world.take_changes();
        store::write(&mut tx, &clock, now, &changes, &opt.id).await?;
        if publisher.due() {
            let began = Instant::now();
            let objects = Objects {
                nodes: nodes.state(),
                pods: live.state(),
                queues: queues.state(),
                pod_groups: groups.state(),
            };
            match cluster_view_of(
                &objects,
                &world,
                &by_job,
                &teams,
                &k.template,
                clock.at(now),
            ) {
                Ok(view) => {
                    let rows = Rows::of(began, &clock, now, &view, &world.queue_views(&by_job))?;
                    publisher.write(&mut tx, rows, &opt.id).await?;
                }
                Err(e) => tracing::warn!(error = %e, "worker: the cluster's view"),
            }
        }
        tx.commit().await?;
        tokio::select! {
            () = tokio::time::sleep(k.tick) => {}
            _ = stopped.changed() => {}
        }
        if *stopped.borrow() {
            let _ = sqlx::query!("UPDATE workers SET active = false WHERE id = $1", opt.id)
                .execute(&mut conn)
                .await;
            let _ = conn.close().await;
            tracing::info!(worker = %opt.id, "worker: stopped");
            return Ok(());
        }
    }
}

/// The cluster as the scheduler sees it (`objects`, every unfinished pod
/// on its nodes), with the portal's jobs named on the GPUs they hold.
fn cluster_view_of(
    objects: &Objects,
    world: &KubeWorld,
    pods: &BTreeMap<String, Vec<Arc<Pod>>>,
    teams: &[Team],
    template: &PodTemplate,
    at: chrono::DateTime<Utc>,
) -> Result<views::ClusterView, SnapshotError> {
    let snap = build_snapshot(
        objects,
        &SnapshotOptions {
            scheduler_name: template.scheduler_name.clone(),
            ..SnapshotOptions::default()
        },
    )?;
    let owners = world.owners(pods);
    let jobs: Vec<ViewJob> = snap
        .jobs
        .iter()
        .map(|j| {
            let rec = j.spec.tasks.first().and_then(|t| owners.get(&t.name));
            ViewJob {
                id: rec.map_or("", |r| r.id.as_str()),
                team: rec.map_or(j.spec.team.as_str(), |r| r.team.as_str()),
                class: rec.map_or(j.spec.class, |r| r.class).as_str(),
                job: j,
                running: j.phase != Phase::Pending,
            }
        })
        .collect();
    Ok(views::cluster_view(
        &snap.state,
        teams.iter().map(|t| t.name.as_str()),
        &jobs,
        api::Clock {
            now: at,
            speed: 1.0,
        },
    ))
}

/// The pods Partita made, by the ID of their job.
fn pods_by_job(pods: &Store<Pod>) -> BTreeMap<String, Vec<Arc<Pod>>> {
    let mut out: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
    for p in pods.state() {
        let id = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LABEL_JOB_ID))
            .cloned();
        if let Some(id) = id {
            out.entry(id).or_default().push(p);
        }
    }
    for list in out.values_mut() {
        list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    }
    out
}

/// A job that arrived on the cluster: its pods (in name order) and the
/// row to store for it.
struct Arrived {
    pods: Vec<Arc<Pod>>,
    stored: store::ClusterJob,
    /// Some pod has not finished.
    live: bool,
}

/// The pods people made for Partita's scheduler, as jobs by their name on
/// the cluster (`k8s::jobs::job_id`), each under its Queue's team. Pods
/// the engine could not take (a bad demand) are left out: the scheduler
/// tells their owners why in an Event.
fn cluster_jobs(
    pods: &Store<Pod>,
    queues: &Store<Queue>,
    groups: &Store<PodGroup>,
) -> BTreeMap<String, Arrived> {
    let mut by_job: BTreeMap<String, Vec<Arc<Pod>>> = BTreeMap::new();
    for p in pods.state() {
        by_job.entry(job_id(&p)).or_default().push(p);
    }
    let mut out = BTreeMap::new();
    for (name, mut list) in by_job {
        list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let first = &list[0];
        let ns = first.metadata.namespace.clone().unwrap_or_default();
        let group = group_name(first).to_string();
        // The stores are indexed by name: no scan per job.
        let pod_group = (!group.is_empty())
            .then(|| groups.get(&ObjectRef::new(&group).within(&ns)))
            .flatten();
        let queue = labels_of(first)
            .get(LABEL_QUEUE)
            .cloned()
            .or_else(|| pod_group.as_ref().and_then(|g| g.spec.queue.clone()))
            .unwrap_or_else(|| DEFAULT_QUEUE.to_string());
        let Some(team) = queues
            .get(&ObjectRef::new(&queue))
            .map(|q| q.spec.team.clone())
        else {
            continue;
        };
        let Ok(tasks) = list
            .iter()
            .map(|p| task_of(p))
            .collect::<Result<Vec<_>, _>>()
        else {
            continue;
        };
        let gang = match &pod_group {
            Some(g) => g.spec.min_member,
            None if group.is_empty() => 0,
            None => tasks.len() as i32,
        };
        let duration =
            duration_annotation(annotations_of(first), ANNOTATION_ESTIMATED_RUNTIME).unwrap_or(0);
        let submitted = list
            .iter()
            .filter_map(|p| p.metadata.creation_timestamp.as_ref())
            .map(|t| chrono::DateTime::<Utc>::from_timestamp_nanos(t.0.as_nanosecond() as i64))
            .min()
            .unwrap_or_else(Utc::now);
        let live = list.iter().any(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        });
        let stored = store::ClusterJob {
            cluster_job: name.clone(),
            team,
            class: class_of(first),
            spec: super::spec::JobSpec {
                tasks,
                gang,
                duration,
                ..Default::default()
            },
            submitted,
        };
        out.insert(
            name,
            Arrived {
                pods: list,
                stored,
                live,
            },
        );
    }
    out
}

/// Each node's GPU model and capacity tier, as the scheduler reads them.
fn node_facts(nodes: &Store<Node>) -> BTreeMap<String, NodeFacts> {
    let opt = NodeOptions::default();
    nodes
        .state()
        .iter()
        .map(|n| {
            let v = view_node(n, &opt);
            let model = if v.spec.gpu_model.is_empty() {
                String::new()
            } else {
                partita_engine::gpu::lookup(&v.spec.gpu_model).name.clone()
            };
            let tier = partita_engine::cluster::parse_tier(&v.spec.tier)
                .unwrap_or_default()
                .as_str()
                .to_string();
            (v.spec.name.clone(), NodeFacts { model, tier })
        })
        .collect()
}

/// What the worker writes to the cluster.
struct Cluster {
    client: kube::Client,
    /// Namespaces known to exist.
    namespaces: BTreeSet<String>,
    /// The teams as last written to Queues.
    queues: Vec<Team>,
}

impl Cluster {
    /// Keeps one Queue per team equal to its quota (whole GPUs: a Queue
    /// counts GPUs, the database thousandths).
    async fn sync_queues(&mut self, teams: &[Team]) {
        if self.queues == teams {
            return;
        }
        let api = Api::<Queue>::all(self.client.clone());
        let mut all_written = true;
        for t in teams {
            let mut q = Queue::new(
                &t.name,
                QueueSpec {
                    team: t.name.clone(),
                    guaranteed_gpus: t.guarantee / 1000,
                    burst_gpus: (t.burst > t.guarantee).then_some(t.burst / 1000),
                    weight: Some(t.weight),
                    allowed_priority_classes: Vec::new(),
                },
            );
            q.metadata.labels = Some(BTreeMap::from([(
                LABEL_MANAGED_BY.to_string(),
                MANAGED_BY.to_string(),
            )]));
            let pp = PatchParams::apply(FIELD_MANAGER).force();
            if let Err(e) = api.patch(&t.name, &pp, &Patch::Apply(&q)).await {
                tracing::warn!(team = %t.name, error = %e, "worker: writing the team's Queue");
                all_written = false;
            }
        }
        if all_written {
            self.queues = teams.to_vec();
        }
    }

    async fn ensure_namespace(&mut self, name: &str) -> anyhow::Result<()> {
        if self.namespaces.contains(name) {
            return Ok(());
        }
        let api = Api::<Namespace>::all(self.client.clone());
        let ns = Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            ..Namespace::default()
        };
        match api.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).context(format!("creating namespace {name}")),
        }
        self.namespaces.insert(name.into());
        Ok(())
    }

    async fn apply(&mut self, a: Action) -> Result<(), (i64, anyhow::Error)> {
        match a {
            Action::Create { seq, workload } => self.create(*workload).await.map_err(|e| (seq, e)),
            Action::Delete { seq, pods } => {
                for (ns, name) in pods {
                    let api = Api::<Pod>::namespaced(self.client.clone(), &ns);
                    match api.delete(&name, &DeleteParams::default()).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(e)) if e.code == 404 => {}
                        Err(e) => {
                            return Err((
                                seq,
                                anyhow::Error::new(e).context(format!("deleting pod {ns}/{name}")),
                            ));
                        }
                    }
                }
                Ok(())
            }
        }
    }

    /// Creates a job's objects, the PodGroup first so that the scheduler
    /// never sees the gang's pods without their size; what exists already
    /// (a retry, a restarted worker) is left as it is.
    async fn create(&mut self, w: crate::k8s::workloads::Workload) -> anyhow::Result<()> {
        let Some(ns) = w.pods.first().and_then(|p| p.metadata.namespace.clone()) else {
            return Ok(());
        };
        self.ensure_namespace(&ns).await?;
        if let Some(pg) = &w.pod_group {
            let api = Api::<PodGroup>::namespaced(self.client.clone(), &ns);
            match api.create(&PostParams::default(), pg).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => return Err(e).context("creating the PodGroup"),
            }
        }
        let api = Api::<Pod>::namespaced(self.client.clone(), &ns);
        for p in &w.pods {
            match api.create(&PostParams::default(), p).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(e) => {
                    let name = p.metadata.name.clone().unwrap_or_default();
                    return Err(e).context(format!("creating pod {ns}/{name}"));
                }
            }
        }
        Ok(())
    }
}
