//! The cluster a scenario describes (the Go build's nodes.go): its nodes,
//! and which node groups can run which profiles.

use std::collections::BTreeMap;

use super::{NodeGroup, Scenario};
use crate::cluster::{LABEL_BLOCK, LABEL_LEAF, LABEL_SPINE, Node, NodeSpec, build_node};
use crate::gpu::{self, DEFAULT_HEADROOM, MEMORY_SLICES};
use crate::profiles::Profile;

impl Scenario {
    /// Builds the cluster: each group's nodes named group-0, group-1, …,
    /// spread round-robin over the group's leaf switches.
    pub fn nodes(&self) -> Result<Vec<Node>, super::Error> {
        let mut nodes = Vec::new();
        for (i, g) in self.node_groups.iter().enumerate() {
            for j in 0..g.count.max(0) {
                let n = build_node(&g.spec(j))
                    .map_err(|e| self.error(&format!("nodes[{i}]"), e.to_string()))?;
                nodes.push(n);
            }
        }
        Ok(nodes)
    }

    /// The groups that can run a task of `p`.
    pub(super) fn holders(&self, p: &Profile) -> Vec<&NodeGroup> {
        self.node_groups.iter().filter(|g| g.holds(p)).collect()
    }

    /// How many GPUs of the cluster whole tasks of `p` can use at once: per
    /// node, whole multiples of `p.gpus`.
    pub(super) fn capacity_for(&self, p: &Profile) -> i64 {
        let per = i64::from(p.gpus.max(1));
        self.holders(p)
            .iter()
            .map(|g| g.count * (g.gpus / per * per))
            .sum()
    }

    /// The GPU models a task of `p` may run on: empty when every model in
    /// the cluster can hold it, so that demands stay unconstrained unless
    /// the cluster mixes GPUs too small for the profile with larger ones.
    pub(super) fn models_for(&self, p: &Profile) -> Vec<String> {
        let mut all: Vec<&str> = Vec::new();
        let mut ok: Vec<String> = Vec::new();
        for g in &self.node_groups {
            if !all.contains(&g.gpu.as_str()) {
                all.push(&g.gpu);
            }
            if g.holds(p) && !ok.contains(&g.gpu) {
                ok.push(g.gpu.clone());
            }
        }
        if ok.len() == all.len() {
            return Vec::new();
        }
        ok
    }

    /// The smallest share of the cluster's GPUs a task of `p` can take:
    /// what it costs where it fits best.
    pub(super) fn gpu_equivalents(&self, p: &Profile) -> f64 {
        let best = self
            .holders(p)
            .iter()
            .map(|g| g.share(p))
            .fold(f64::INFINITY, f64::min);
        if best == f64::INFINITY { 0.0 } else { best }
    }
}

/// The GPU memory a task of `p` needs per GPU, with the headroom the
/// engine adds when it picks a MIG profile.
pub(super) fn need_mib(p: &Profile) -> f64 {
    p.peak_memory_mib as f64 * (1.0 + DEFAULT_HEADROOM)
}

impl NodeGroup {
    /// The j-th node of the group.
    fn spec(&self, j: i64) -> NodeSpec {
        let mut labels = BTreeMap::new();
        if !self.leaves.is_empty() {
            let leaf = &self.leaves[(j % self.leaves.len() as i64) as usize];
            labels.insert(LABEL_LEAF.to_string(), leaf.clone());
        }
        if !self.spine.is_empty() {
            labels.insert(LABEL_SPINE.to_string(), self.spine.clone());
        }
        if !self.block.is_empty() {
            labels.insert(LABEL_BLOCK.to_string(), self.block.clone());
        }
        NodeSpec {
            name: format!("{}-{j}", self.group),
            cpu_milli: self.cpu_milli,
            memory_mib: self.memory_mib,
            labels,
            tier: self.tier.as_str().to_string(),
            gpu_model: self.gpu.clone(),
            gpus: i32::try_from(self.gpus).unwrap_or(i32::MAX),
            mig: self.mig,
            nvlink: self.nvlink.clone(),
            ..NodeSpec::default()
        }
    }

    /// Whether one node of the group can run a task of `p`.
    fn holds(&self, p: &Profile) -> bool {
        let m = gpu::lookup(&self.gpu);
        if need_mib(p) > m.memory_mib as f64 {
            return false;
        }
        !p.whole() || self.gpus >= i64::from(p.gpus.max(1))
    }

    /// The part of one GPU of the group a task of `p` takes, in
    /// GPU-equivalents: for a MIG slice the larger of its compute share
    /// (slices of 7) and memory share (slices of 8), because either may be
    /// what stops another slice fitting; without MIG the larger of its
    /// compute and memory shares.
    fn share(&self, p: &Profile) -> f64 {
        if p.whole() {
            return f64::from(p.gpus.max(1));
        }
        let m = gpu::lookup(&self.gpu);
        if self.mig
            && let Ok(mp) = m.profile_for(p.peak_memory_mib, p.compute, DEFAULT_HEADROOM)
        {
            return mp
                .compute_share()
                .max(f64::from(mp.memory) / f64::from(MEMORY_SLICES));
        }
        1f64.min(p.compute.max(need_mib(p) / m.memory_mib as f64))
    }
}
