//! The cluster's shape, as submissions are checked against it: what one
//! task could ever get (the engine's `Capacity`: the largest node's CPU,
//! memory and GPUs per model, the MIG profiles each model offers) and the
//! number of GPUs (the bound on a team's quota). It comes from a scenario
//! file's `nodes` (`--cluster`), by default the built-in demo cluster, the
//! Go build's default too.

use std::collections::BTreeMap;

use partita_engine::cluster::State;
use partita_engine::placement::capacity_of;
use partita_engine::scenario;
use partita_engine::workload::Capacity;

/// The built-in demo cluster (4 nodes of 8 H100-80GB, 2 of 8 A100-80GB).
pub const DEMO_SCENARIO: &str = include_str!("../../scenarios/demo.yaml");

#[derive(Debug, Clone)]
pub struct ClusterShape {
    /// The scenario's name.
    pub name: String,
    pub gpus: i64,
    pub capacity: Capacity,
    /// Each node's tier and its GPUs' models by index: what a job's
    /// placement is shown with.
    pub nodes: BTreeMap<String, NodeShape>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeShape {
    pub tier: String,
    pub models: Vec<String>,
}

impl ClusterShape {
    /// The shape of the nodes of a scenario file's text.
    pub fn from_scenario(text: &str, file: &str) -> Result<ClusterShape, String> {
        let sc = scenario::parse(text, file).map_err(|e| e.to_string())?;
        let nodes = sc.nodes().map_err(|e| e.to_string())?;
        let state = State::new(nodes).map_err(|e| e.to_string())?;
        Ok(ClusterShape {
            gpus: sc.gpus(),
            ..ClusterShape::of_state(&sc.name, &state)
        })
    }

    /// The shape of a cluster's nodes (a Kubernetes cluster's, as the
    /// scheduler reads them).
    pub fn of_state(name: &str, state: &State) -> ClusterShape {
        let nodes = state
            .nodes()
            .map(|n| {
                let shape = NodeShape {
                    tier: n.tier().as_str().to_string(),
                    models: n
                        .gpus()
                        .iter()
                        .map(|g| g.model().name.to_string())
                        .collect(),
                };
                (n.name().to_string(), shape)
            })
            .collect();
        ClusterShape {
            name: name.to_string(),
            gpus: state.nodes().map(|n| n.gpus().len() as i64).sum(),
            capacity: capacity_of(state),
            nodes,
        }
    }

    /// The built-in demo cluster.
    pub fn demo() -> ClusterShape {
        ClusterShape::from_scenario(DEMO_SCENARIO, "demo.yaml")
            .expect("the built-in demo scenario is valid")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_has_eight_gpu_nodes() {
        let c = ClusterShape::demo();
        assert_eq!(c.gpus, 48);
        assert_eq!(c.capacity.max_gpus.get("H100-80GB"), Some(&8));
        assert!(c.capacity.mig_profiles.contains_key("3g.40gb"));
    }
}
