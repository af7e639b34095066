//! The JSON types of the HTTP API (`/api/v1`), shared by the server, the
//! CLI client and the OpenAPI document (generated from these structs with
//! utoipa, so a field added here appears in the document). They follow the
//! Go build's `go/internal/api`: the same names, lower case with
//! underscores, and the same omissions of empty fields.
//!
//! Clocks: every time here says which clock it is in. Times the API
//! itself records (submission, audit, tokens, users) are **wall time**,
//! UTC. Times the worker records (a job's start and end) are **cluster
//! time**: on the virtual cluster it runs faster than the wall clock. A
//! job event carries `clock` ("wall" or "cluster").

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The API's version, the path prefix's last element.
pub const VERSION: &str = "v1";
/// Where every API route lives.
pub const PREFIX: &str = "/api/v1";

/// Roles a user may have, most powerful first.
pub const ROLE_ADMIN: &str = "admin";
pub const ROLE_LEAD: &str = "lead";
pub const ROLE_MEMBER: &str = "member";
pub const ROLE_VIEWER: &str = "viewer";
pub const ROLE_FINANCE: &str = "finance";
pub const ROLES: [&str; 5] = [
    ROLE_ADMIN,
    ROLE_LEAD,
    ROLE_MEMBER,
    ROLE_VIEWER,
    ROLE_FINANCE,
];

/// Job states. "requeued" and "priority" are events, not states.
pub const STATE_QUEUED: &str = "queued";
pub const STATE_CANCELLED: &str = "cancelled";
pub const STATES: [&str; 7] = [
    "queued",
    "admitted",
    "running",
    "preempted",
    "succeeded",
    "failed",
    "cancelled",
];

/// Whether a job in state `s` is finished for good.
pub fn terminal(s: &str) -> bool {
    matches!(s, "succeeded" | "failed" | "cancelled")
}

/// The body of every 4xx and 5xx answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Error {
    /// What went wrong, naming the field and value.
    pub error: String,
    /// The request field at fault, when one is.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

/// The caller's token: who it belongs to.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Whoami {
    pub user: String,
    pub role: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub team: String,
    pub token_id: String,
}

/// A tenant with a quota.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Team {
    pub name: String,
    /// Can always be had, by preempting borrowers.
    pub guaranteed_gpus: f64,
    /// The most the team may hold when others leave GPUs idle.
    pub burst_gpus: f64,
    /// Share of what the guarantees leave over.
    pub weight: f64,
    /// Priority classes its jobs may use.
    pub classes: Vec<String>,
    /// The cost centre finance allocates the team's spend to.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub business_unit: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<String>,
}

/// Creates (POST /teams, `name` required) or changes (PATCH
/// /teams/{team}) a team; absent fields keep their value or default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TeamRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub guaranteed_gpus: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub burst_gpus: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<Vec<String>>,
    /// A business unit's name (created when new); "" removes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub business_unit: Option<String>,
}

/// Groups a team's jobs for chargeback.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Project {
    pub team: String,
    pub name: String,
    /// Wall time, UTC.
    pub created_at: DateTime<Utc>,
}

/// The body of POST /teams/{team}/projects.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ProjectRequest {
    pub name: String,
}

/// A person or robot that holds tokens.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct User {
    pub name: String,
    pub role: String,
    /// Every role but admin and finance has one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub team: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disabled: bool,
    /// Wall time, UTC.
    pub created_at: DateTime<Utc>,
}

/// The body of POST /users.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct UserRequest {
    pub name: String,
    pub role: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub team: String,
}

/// The body of PATCH /users/{user}: a new role, team, or disabled flag.
/// Absent fields keep their value; `team` "" leaves the user without one
/// (admin and finance).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct UserPatch {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub team: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disabled: Option<bool>,
}

/// The body of POST /users/{user}/tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TokenRequest {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// When the token stops working, wall time (RFC 3339); default 90
    /// days from now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// An API token; only [`NewToken`] carries the secret, once.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Token {
    pub id: String,
    pub user: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Wall time, UTC, as are the other times of a token.
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<DateTime<Utc>>,
}

/// The answer to POST /users/{user}/tokens: the secret is shown here and
/// never again (the server keeps only its SHA-256).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NewToken {
    #[serde(flatten)]
    pub token: Token,
    pub secret: String,
}

/// One row of the workload profile catalog.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Profile {
    pub name: String,
    /// inference or training
    pub kind: String,
    pub peak_memory_mib: i64,
    pub compute: f64,
    /// Whole GPUs per task; 0: sized by memory.
    pub gpus: i32,
    pub cpu_milli: i64,
    pub host_memory_mib: i64,
    pub basis: String,
}

/// The body of POST /jobs. Unknown fields are refused.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SubmitRequest {
    /// Defaults to the caller's team; only an admin submits for another.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub team: String,
    /// A project of the team; default "default".
    #[serde(skip_serializing_if = "String::is_empty")]
    pub project: String,
    /// Free text, up to 200 characters.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub image: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub command: String,
    /// production, batch or best-effort (default batch); the team must
    /// allow it.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub class: String,
    /// The number of tasks (default 1); `replicas` is the same for
    /// services. Give at most one.
    #[serde(skip_serializing_if = "is_zero")]
    pub tasks: i64,
    #[serde(skip_serializing_if = "is_zero")]
    pub replicas: i64,
    /// 0 or 1 (each task on its own) or the task count (all or nothing).
    #[serde(skip_serializing_if = "is_zero")]
    pub gang: i64,
    /// Per task: "4" or "500m" cores.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cpu: String,
    /// Per task: "32Gi".
    #[serde(skip_serializing_if = "String::is_empty")]
    pub memory: String,
    pub gpu: GpuRequest,
    /// How long the job runs once started (cluster time, "2h"); empty:
    /// until cancelled.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub duration: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub fail_after: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub checkpoint_every: String,
    /// Or the Idempotency-Key header: the same key with the same body
    /// gives the same job, never two; with another body, 409.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub idempotency_key: String,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

fn is_zero_f(n: &f64) -> bool {
    *n == 0.0
}

/// One task's GPU demand: exactly one of count, mig, memory (with
/// compute), milli or profile, or none for a CPU-only task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct GpuRequest {
    /// Whole GPUs, all on one node.
    #[serde(skip_serializing_if = "is_zero")]
    pub count: i64,
    /// A MIG profile: "1g.10gb", "3g.40gb".
    #[serde(skip_serializing_if = "String::is_empty")]
    pub mig: String,
    /// Peak GPU memory "20Gi": the engine picks the slice.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub memory: String,
    /// With memory: the share of one GPU's compute, 0..1.
    #[serde(skip_serializing_if = "is_zero_f")]
    pub compute: f64,
    /// A share of one GPU in thousandths, 1..999.
    #[serde(skip_serializing_if = "is_zero")]
    pub milli: i64,
    /// A row of the profile catalog (GET /profiles).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub profile: String,
    /// Allowed GPU models; default any.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

/// A job as the API shows it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Job {
    pub id: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub team: String,
    pub project: String,
    pub user: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub command: String,
    pub class: String,
    pub state: String,
    /// Of the last transition, or why it waits.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// What it asks for, in GPUs (a MIG slice counts its compute share).
    pub gpus: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gang: i64,
    /// Cluster time ("2h").
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub duration: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub checkpoint_every: String,
    pub tasks: Vec<Task>,
    /// Wall time, UTC: when the API stored the submission.
    pub submitted_at: DateTime<Utc>,
    /// Cluster time: the last admission (the worker's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<DateTime<Utc>>,
    /// Cluster time: when it ended for good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// Admissions so far.
    pub attempts: i64,
    /// While queued: its place in its team's queue, as the worker last
    /// published it (GET /jobs/{id} only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueSlot>,
    /// Wall time: a requeue asked for, not yet done by the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requeue_requested_at: Option<DateTime<Utc>>,
    /// Wall time: a cancel asked for while the job holds resources, not
    /// yet done by the worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_requested_at: Option<DateTime<Utc>>,
    /// On GET /jobs/{id}.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
}

/// One task of a job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Task {
    pub name: String,
    pub cpu_milli: i64,
    pub memory_mib: i64,
    /// The demand in words: "1 GPU", "MIG 1g.10gb".
    pub gpu: String,
    /// Where it runs while the job holds resources (GET /jobs/{id} only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// What a task holds on one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Placement {
    pub node: String,
    pub tier: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub grants: Vec<Grant>,
}

/// One GPU's part of a placement: a MIG slice, or a share or whole GPU in
/// milli.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Grant {
    pub gpu: i64,
    pub model: String,
    /// "3g.40gb@4": the profile at its start slice.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub slice: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub milli: i64,
}

/// One transition of a job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Event {
    /// In the clock `clock` names.
    pub time: DateTime<Utc>,
    /// "wall" (recorded by the API) or "cluster" (by the worker).
    pub clock: String,
    /// The state entered, or "submitted", "priority",
    /// "requeue_requested", "cancel_requested".
    pub state: String,
    pub reason: String,
}

/// A page of jobs, newest first. `next`, when set, is the cursor for the
/// following page (`?after=`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct JobList {
    pub jobs: Vec<Job>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next: String,
}

/// The body of PATCH /jobs/{id}: a new priority class, within the team's
/// allowed classes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct JobPatch {
    pub class: String,
}

/// POST /jobs/{id}/move: one place `up` (sooner) or `down` (later) in its
/// team's queue, among the team's queued jobs of its class.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct JobMove {
    pub direction: String,
}

/// One row of the audit log.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditEntry {
    pub seq: i64,
    /// Wall time, UTC.
    pub at: DateTime<Utc>,
    pub actor: String,
    /// "team.update", "user.create", "job.cancel", ...
    pub action: String,
    pub target_kind: String,
    pub target: String,
    #[schema(value_type = Object)]
    pub before: Option<serde_json::Value>,
    #[schema(value_type = Object)]
    pub after: Option<serde_json::Value>,
}

/// A page of the audit log, newest first; `next` is the cursor for the
/// following page (`?after=`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditList {
    pub entries: Vec<AuditEntry>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next: String,
}

/// One row of the usage ledger (`GET /ledger`): a finished hold of one
/// GPU or MIG slice by one task, charged once, when it ended. Its share is
/// in 1/7000 GPU: a whole GPU is 7000, a MIG slice of k compute slices
/// k×1000, a share of m milli 7m. `started_at` and `ended_at` are cluster
/// time; `recorded_at` is wall time.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct LedgerEntry {
    pub seq: i64,
    pub hold: String,
    pub recorded_at: DateTime<Utc>,
    pub job: String,
    pub task: String,
    /// "" when the team has no business unit.
    pub business_unit: String,
    pub team: String,
    pub project: String,
    pub user: String,
    pub class: String,
    pub node: String,
    pub gpu: i32,
    pub model: String,
    pub tier: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_profile: Option<String>,
    pub share: i64,
    pub started_at: DateTime<Utc>,
    pub ended_at: DateTime<Utc>,
    /// share × held milliseconds.
    pub share_ms: i64,
    /// Exact decimals of micro_gpu_hours and cost_micros.
    pub gpu_hours: String,
    pub cost: String,
    pub micro_gpu_hours: i64,
    pub price_micros: i64,
    pub cost_micros: i64,
    pub currency: String,
}

/// A page of the ledger in order; `next` is the cursor for the following
/// page (`?after=`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Ledger {
    pub entries: Vec<LedgerEntry>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next: String,
}

/// The cluster's clock: on the virtual cluster, cluster time runs `speed`
/// times faster than the wall clock while a worker is active, and stands
/// still while none is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Clock {
    /// Cluster time: the moment the answer describes.
    pub now: DateTime<Utc>,
    /// Cluster seconds per wall second (0 before any worker ran).
    pub speed: f64,
}

/// A queued job's place: its position in its team's queue (1 = next), why
/// it waits, and when it is expected to start.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct QueueSlot {
    pub position: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Cluster time: a projection of the queue forward on a copy of the
    /// cluster, assuming running jobs end when declared and nothing new
    /// arrives; absent when the projection does not reach the job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_start: Option<DateTime<Utc>>,
    /// The same in wall-clock seconds from the answer's `clock.now`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_seconds: Option<f64>,
}

/// Every queued job, by team (sorted by name), each team's in the order
/// the scheduler will consider them.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Queue {
    pub clock: Clock,
    pub teams: Vec<TeamQueue>,
}

/// One team's queued jobs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TeamQueue {
    pub team: String,
    pub jobs: Vec<QueueEntry>,
}

/// One queued job.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct QueueEntry {
    pub job: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub project: String,
    pub class: String,
    pub gpus: f64,
    /// Cluster time, as the job's submitted_at.
    pub submitted_at: DateTime<Utc>,
    #[serde(flatten)]
    pub slot: QueueSlot,
}

/// The answer to POST /jobs/preview: the job as a submission of the same
/// body would make it (defaults filled in, every check done), and what one
/// task would get on each GPU model of the cluster. Nothing is stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobPreview {
    pub team: String,
    pub project: String,
    pub class: String,
    pub tasks: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub gang: i64,
    /// Per task.
    pub cpu_milli: i64,
    /// Per task.
    pub memory_mib: i64,
    /// One task's GPU demand in words.
    pub demand: String,
    /// The whole job, in GPUs (a slice counts its compute share).
    pub gpus: f64,
    /// The most the team may hold.
    pub burst_gpus: f64,
    pub options: Vec<PreviewOption>,
}

/// What one task would take on GPUs of one model: a MIG profile (picked
/// as the engine picks it: the smallest that holds the peak memory with 5%
/// headroom and the compute share), a share of a GPU with MIG off, or
/// whole GPUs on one node. `fits` is false, with `note` saying why, when no
/// GPU of the model can ever hold the task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PreviewOption {
    pub model: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mig: String,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mig_memory_mib: i64,
    /// The profile's share of the GPU's compute.
    #[serde(default, skip_serializing_if = "is_zero_f")]
    pub mig_compute: f64,
    /// With MIG off: thousandths of one GPU.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub milli: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub whole_gpus: i64,
    pub fits: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// The cluster: every node, GPU and MIG slice, and how much of it is in
/// use, as the worker last published it. Tasks of teams the caller may not
/// see show as busy without naming the job or team.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Cluster {
    pub clock: Clock,
    pub gpus: i64,
    pub utilization: Utilization,
    pub nodes: Vec<Node>,
}

/// In GPUs and as a share of all GPUs. Allocated is what tasks hold (a
/// slice counts the larger of its compute and memory share); useful is
/// what running tasks need (a memory profile its need, not the slice it
/// got).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Utilization {
    pub allocated_gpus: f64,
    pub useful_gpus: f64,
    pub allocated: f64,
    pub useful: f64,
    pub queued_jobs: i64,
    pub running_jobs: i64,
}

/// One machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Node {
    pub name: String,
    pub tier: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub leaf: String,
    pub cpu_milli: i64,
    pub cpu_used_milli: i64,
    pub memory_mib: i64,
    pub memory_used_mib: i64,
    pub gpus: Vec<Gpu>,
}

/// One GPU: whole or shared in milli with MIG off, split into slices with
/// MIG on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Gpu {
    pub index: i64,
    pub model: String,
    pub mig: bool,
    /// A MIG change is in flight.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cordoned: bool,
    /// MIG off: milli held.
    pub used_milli: i64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slices: Vec<Slice>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holders: Vec<Hold>,
}

/// One MIG instance; busy without a job: another team's task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Slice {
    /// "3g.40gb@4"
    pub slice: String,
    pub busy: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub team: String,
}

/// A task's share of a GPU with MIG off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Hold {
    pub milli: i64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub job: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub team: String,
}

/// The body of PUT /prices: the price of one GPU-hour of a whole GPU, in
/// `currency` units, for each model (`"*"`: any model not listed) and
/// capacity tier given. Models and tiers not given keep their price.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct PricesUpdate {
    pub currency: String,
    pub prices: Vec<crate::accounting::PriceItem>,
}
