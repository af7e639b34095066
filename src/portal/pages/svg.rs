//! The cluster's drawings, as the Go portal drew them (`draw.go`,
//! `overview.go`, `samples.go`): the utilization chart, GPUs by state,
//! and every node's GPUs with their MIG slices. Everything is SVG
//! written on the server; colours come from classes in portal.css.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use partita_engine::gpu::{self, MEMORY_SLICES, Placement};
use partita_engine::svgchart::{Chart, Point, Series};

use crate::api;

/// How many utilization samples the chart keeps.
pub const SAMPLES: usize = 720;

/// The cluster's utilization at one cluster time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub at: DateTime<Utc>,
    pub allocated: f64,
    pub useful: f64,
}

/// The latest utilization samples, kept in the web process's memory.
/// The worker publishes only the current utilization (GET
/// /api/v1/cluster, the `worker_views` row) and keeps no history, so the
/// portal records one sample per new publication it reads: `partita
/// serve` reads one every 5 s ([`spawn_sampler`]), and so does any page
/// that reads the cluster. The chart starts afresh when the server does,
/// as the Go portal's did.
#[derive(Debug, Default)]
pub struct Samples {
    ring: Mutex<VecDeque<Sample>>,
}

impl Samples {
    /// Records the cluster's utilization unless a sample of that cluster
    /// time is already kept.
    pub fn record(&self, c: &api::Cluster) {
        let mut ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        if ring.back().is_some_and(|s| s.at >= c.clock.now) {
            return;
        }
        if ring.len() == SAMPLES {
            ring.pop_front();
        }
        ring.push_back(Sample {
            at: c.clock.now,
            allocated: c.utilization.allocated,
            useful: c.utilization.useful,
        });
    }

    /// The samples, oldest first.
    pub fn all(&self) -> Vec<Sample> {
        let ring = self.ring.lock().unwrap_or_else(|e| e.into_inner());
        ring.iter().copied().collect()
    }
}

/// The utilization chart: allocated and useful against cluster time
/// before now, in minutes while the samples span 3 hours or less, else
/// in hours (the Go portal's `utilizationChart`).
pub fn utilization_chart(samples: &[Sample], now: DateTime<Utc>) -> String {
    let mut span = 3600.0_f64;
    for s in samples {
        span = span.max((now - s.at).num_milliseconds() as f64 / 1000.0);
    }
    let (unit, label, from) = if span > 3.0 * 3600.0 {
        (3600.0, "cluster hours before now", (span / 3600.0).ceil())
    } else {
        (
            60.0,
            "cluster minutes before now",
            (span / 600.0).ceil() * 10.0,
        )
    };
    let point = |s: &Sample, y: f64| Point {
        x: (s.at - now).num_milliseconds() as f64 / 1000.0 / unit,
        y: y * 100.0,
    };
    let chart = Chart {
        x_label: label.into(),
        y_label: "% of GPUs".into(),
        x_min: -from,
        x_max: 0.0,
        y_min: 0.0,
        y_max: 100.0,
        width: 760,
        height: 250,
        series: vec![
            Series {
                name: "allocated".into(),
                points: samples.iter().map(|s| point(s, s.allocated)).collect(),
                ..Series::default()
            },
            Series {
                name: "useful".into(),
                points: samples.iter().map(|s| point(s, s.useful)).collect(),
                dashed: true,
                ..Series::default()
            },
        ],
        ..Chart::default()
    };
    // svgchart escapes every text it writes; its document header (an
    // XML declaration, if any) is not wanted inside HTML.
    let svg = chart.render();
    match svg.find("<svg") {
        Some(at) => svg[at..].to_string(),
        None => svg,
    }
}

/// The part of a GPU in use: a MIG slice counts the larger of its
/// compute and memory share, as the API's utilization does.
pub fn gpu_share(g: &api::Gpu) -> f64 {
    if !g.mig {
        return g.used_milli as f64 / 1000.0;
    }
    let model = gpu::lookup(&g.model);
    g.slices
        .iter()
        .filter(|s| s.busy)
        .filter_map(|s| Placement::parse(&s.slice).ok())
        .filter_map(|p| model.find(&p.profile).cloned())
        .map(|prof| {
            prof.compute_share()
                .max(f64::from(prof.memory) / f64::from(MEMORY_SLICES))
        })
        .sum()
}

/// GPUs in one state, and its part of the stacked bar (of 1000).
#[derive(Debug, Clone)]
pub struct StateCount {
    pub name: &'static str,
    pub class: &'static str,
    pub n: i64,
    pub x: String,
    pub w: String,
}

/// GPUs by state: full, partly used, being reconfigured, idle.
pub fn gpu_states(c: &api::Cluster) -> Vec<StateCount> {
    let (mut full, mut part, mut reconf, mut idle) = (0, 0, 0, 0);
    for g in c.nodes.iter().flat_map(|n| &n.gpus) {
        let share = gpu_share(g);
        if g.cordoned {
            reconf += 1;
        } else if share <= 0.0 {
            idle += 1;
        } else if share >= 0.999 {
            full += 1;
        } else {
            part += 1;
        }
    }
    let total = c.gpus.max(1) as f64;
    let mut x = 0.0;
    [
        ("full", "st-full", full),
        ("partly used", "st-part", part),
        ("reconfiguring", "st-reconf", reconf),
        ("idle", "st-idle", idle),
    ]
    .into_iter()
    .map(|(name, class, n)| {
        let w = n as f64 / total * 1000.0;
        let s = StateCount {
            name,
            class,
            n,
            x: f1(x),
            w: f1(w),
        };
        x += w;
        s
    })
    .collect()
}

/// A colour class per team, by name order, so that a team keeps its
/// colour from page to page.
pub fn team_colors(teams: &[String]) -> BTreeMap<String, String> {
    let mut names = teams.to_vec();
    names.sort();
    names
        .into_iter()
        .enumerate()
        .map(|(i, n)| (n, format!("tm{}", i % 8)))
        .collect()
}

// The node drawing: each GPU is a bar of its eight memory slices; a MIG
// instance covers the slices it owns (its placement), a GPU with MIG off
// is filled by the shares its tasks hold. Sizes in the SVG's units.
const BAR_X: f64 = 58.0;
const BAR_W: f64 = 296.0;
const ROW_H: f64 = 22.0;
const ROW_GAP: f64 = 5.0;

/// The nodes of one leaf switch and tier.
#[derive(Debug, Clone)]
pub struct NodeGroup {
    pub leaf: String,
    pub tier: String,
    pub nodes: Vec<NodeDraw>,
}

#[derive(Debug, Clone)]
pub struct NodeDraw {
    pub name: String,
    pub models: String,
    pub cpu: String,
    pub memory: String,
    pub gpus_used: String,
    pub height: String,
    pub rows: Vec<GpuRow>,
}

#[derive(Debug, Clone)]
pub struct GpuRow {
    pub y: String,
    pub text_y: String,
    pub bottom: String,
    pub label: String,
    pub cordoned: bool,
    pub boxes: Vec<SliceBox>,
    /// The memory-slice boundaries of a MIG GPU.
    pub lines_at: Vec<String>,
}

/// One MIG instance or share of a GPU.
#[derive(Debug, Clone)]
pub struct SliceBox {
    pub x: String,
    pub w: String,
    /// The team's colour, "other", or "free".
    pub class: String,
    pub text: String,
    pub text_x: String,
    pub title: String,
    pub href: String,
}

/// Every node, grouped by leaf switch then tier.
pub fn draw_nodes(c: &api::Cluster, colors: &BTreeMap<String, String>) -> Vec<NodeGroup> {
    let mut groups: BTreeMap<(String, String), Vec<NodeDraw>> = BTreeMap::new();
    for n in &c.nodes {
        groups
            .entry((n.leaf.clone(), n.tier.clone()))
            .or_default()
            .push(draw_node(n, colors));
    }
    groups
        .into_iter()
        .map(|((leaf, tier), nodes)| NodeGroup {
            leaf: if leaf.is_empty() {
                "no leaf switch".into()
            } else {
                leaf
            },
            tier,
            nodes,
        })
        .collect()
}

fn draw_node(n: &api::Node, colors: &BTreeMap<String, String>) -> NodeDraw {
    let mut models = BTreeSet::new();
    let mut used = 0.0;
    let mut rows = Vec::new();
    for (i, g) in n.gpus.iter().enumerate() {
        models.insert(g.model.clone());
        used += gpu_share(g);
        let y = i as f64 * (ROW_H + ROW_GAP);
        let mut row = GpuRow {
            y: f1(y),
            bottom: f1(y + ROW_H),
            text_y: f1(y + ROW_H / 2.0 + 4.0),
            label: format!("GPU {}", g.index),
            cordoned: g.cordoned,
            boxes: Vec::new(),
            lines_at: Vec::new(),
        };
        if g.mig {
            row.label.push_str(" MIG");
            row.boxes = mig_boxes(g, colors);
            row.lines_at = (1..MEMORY_SLICES)
                .map(|k| f1(BAR_X + f64::from(k) * BAR_W / f64::from(MEMORY_SLICES)))
                .collect();
        } else {
            row.boxes = share_boxes(g, colors);
        }
        rows.push(row);
    }
    NodeDraw {
        name: n.name.clone(),
        models: models.into_iter().collect::<Vec<_>>().join(", "),
        cpu: format!(
            "{} of {} cores",
            super::parts::cpu(n.cpu_used_milli),
            super::parts::cpu(n.cpu_milli)
        ),
        memory: format!(
            "{} of {}",
            super::parts::mib(n.memory_used_mib),
            super::parts::mib(n.memory_mib)
        ),
        gpus_used: format!(
            "{} of {} GPUs in use",
            super::parts::gpus(used),
            n.gpus.len()
        ),
        height: f1((n.gpus.len() as f64 * (ROW_H + ROW_GAP) - ROW_GAP).max(ROW_H)),
        rows,
    }
}

fn mig_boxes(g: &api::Gpu, colors: &BTreeMap<String, String>) -> Vec<SliceBox> {
    let model = gpu::lookup(&g.model);
    let mut out = Vec::new();
    for s in &g.slices {
        let Ok(p) = Placement::parse(&s.slice) else {
            continue;
        };
        let width = model.find(&p.profile).map(|x| x.memory).unwrap_or(1);
        let x = BAR_X + f64::from(p.start) * BAR_W / f64::from(MEMORY_SLICES);
        let w = f64::from(width) * BAR_W / f64::from(MEMORY_SLICES);
        let (class, whose, href) = holder(s.busy, &s.job, &s.team, colors);
        let mut text = if width == 1 {
            p.profile.split('.').next().unwrap_or("").to_string()
        } else {
            p.profile.to_string()
        };
        if !s.job.is_empty() && width >= 3 {
            text.push_str(" · ");
            text.push_str(short_id(&s.job));
        }
        out.push(SliceBox {
            x: f1(x),
            w: f1(w),
            class,
            text,
            text_x: f1(x + w / 2.0),
            title: format!("{} at memory slice {}: {whose}", p.profile, p.start),
            href,
        });
    }
    out
}

fn share_boxes(g: &api::Gpu, colors: &BTreeMap<String, String>) -> Vec<SliceBox> {
    let mut out = Vec::new();
    let mut x = BAR_X;
    for h in &g.holders {
        let w = h.milli as f64 / 1000.0 * BAR_W;
        let (class, whose, href) = holder(true, &h.job, &h.team, colors);
        let mut text = if h.milli >= 1000 {
            "whole GPU".to_string()
        } else {
            format!("{}‰", h.milli)
        };
        if !h.job.is_empty() && w >= 110.0 {
            text.push_str(" · ");
            text.push_str(short_id(&h.job));
        }
        out.push(SliceBox {
            x: f1(x),
            w: f1(w),
            class,
            text,
            text_x: f1(x + w / 2.0),
            title: format!("{}/1000 of the GPU: {whose}", h.milli),
            href,
        });
        x += w;
    }
    out
}

/// Whose a slice is: a job the viewer may see (linked, in its team's
/// colour), another team's work (grey, unnamed), or free.
fn holder(
    busy: bool,
    job: &str,
    team: &str,
    colors: &BTreeMap<String, String>,
) -> (String, String, String) {
    if !busy {
        return ("free".into(), "free".into(), String::new());
    }
    if job.is_empty() {
        return (
            "other".into(),
            "in use by another team".into(),
            String::new(),
        );
    }
    let class = colors.get(team).cloned().unwrap_or_else(|| "other".into());
    (
        class,
        format!("job {job} of team {team}"),
        format!("/jobs/{job}"),
    )
}

/// A job ID's last 6 characters.
pub fn short_id(id: &str) -> &str {
    let n = id.len();
    if n > 6 && id.is_char_boundary(n - 6) {
        &id[n - 6..]
    } else {
        id
    }
}

/// One decimal, for SVG coordinates.
pub fn f1(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// The quota bar: held against guarantee and burst, in the SVG's units.
#[derive(Debug, Clone, Default)]
pub struct QuotaBar {
    pub held_w: String,
    pub guarantee_x: String,
    pub over: bool,
}

impl QuotaBar {
    pub fn new(held: f64, guarantee: f64, burst: f64) -> QuotaBar {
        let scale = burst.max(held).max(1.0);
        QuotaBar {
            held_w: f1(held / scale * 600.0),
            guarantee_x: f1(guarantee / scale * 600.0),
            over: held > guarantee + 1e-9,
        }
    }
}

/// Records the published cluster's utilization every `every` while the
/// runtime runs, so the overview's chart has a history even when nobody
/// looked at it (the Go portal's `Run`).
pub fn spawn_sampler(
    pool: sqlx::PgPool,
    samples: std::sync::Arc<Samples>,
    every: std::time::Duration,
) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            match crate::store::views::cluster(&pool).await {
                Ok(Some(view)) => samples.record(&view.cluster),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "portal: sampling the cluster's utilization"),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_keeps_one_sample_per_publication_and_at_most_its_size() {
        let s = Samples::default();
        let mut c = api::Cluster {
            clock: api::Clock {
                now: "2026-01-01T00:00:00Z".parse().unwrap(),
                speed: 60.0,
            },
            gpus: 8,
            utilization: api::Utilization::default(),
            nodes: Vec::new(),
        };
        s.record(&c);
        s.record(&c);
        assert_eq!(s.all().len(), 1);
        for _ in 0..SAMPLES + 5 {
            c.clock.now += chrono::Duration::seconds(5);
            s.record(&c);
        }
        let all = s.all();
        assert_eq!(all.len(), SAMPLES);
        assert_eq!(all.last().unwrap().at, c.clock.now);
        let svg = utilization_chart(&all, c.clock.now);
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("cluster minutes before now"), "{svg}");
    }
}
