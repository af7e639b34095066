//! Building a preset with its placement policy, the way every world does
//! (Go's `build.go`).

use super::config::{Config, SchedError, preset};
use crate::cluster::State;
use crate::frag::{self, Shape};
use crate::placement::Policy;
use crate::policies;
use crate::workload::{self, Kind};

/// The preset `name` and its placement policy: stock Kubernetes placement
/// (whole GPUs, least allocated) for naive and gang-drf, Partita's for
/// partita, told the expected request mix (`shapes_of`; none: one GPU).
pub fn build(name: &str, st: &State, shapes: &[Shape]) -> Result<(Config, Policy), SchedError> {
    let config = preset(name)?;
    let placement = if name == "partita" {
        "partita"
    } else {
        "k8s-default"
    };
    let one_gpu = [Shape {
        milli: 1000,
        num: 1,
        ..Shape::default()
    }];
    let shapes = if shapes.is_empty() {
        &one_gpu[..]
    } else {
        shapes
    };
    let typical = frag::typicals(&frag::without_memory(shapes), frag::DEFAULT_THRESHOLD, None);
    let mut pc = policies::config_for(st, typical);
    pc.shapes = shapes.to_vec();
    let policy = policies::new(placement, pc).map_err(|source| SchedError::Policy {
        name: name.to_string(),
        source,
    })?;
    Ok((config, policy))
}

/// The request mix a placement may know in advance: the tasks of the
/// expected jobs that take whole GPUs or no GPU (MIG tasks are placed by
/// MIG geometry, not fragment measures).
pub fn shapes_of(jobs: &[workload::Job]) -> Vec<Shape> {
    let mut shapes = Vec::new();
    for j in jobs {
        for t in &j.tasks {
            match t.gpu.kind {
                Kind::WholeGpus => shapes.push(Shape {
                    cpu_milli: t.cpu_milli,
                    mem_mib: t.memory_mib,
                    milli: 1000,
                    num: usize::try_from(t.gpu.count).unwrap_or(0),
                    ..Shape::default()
                }),
                Kind::NoGpu => shapes.push(Shape {
                    cpu_milli: t.cpu_milli,
                    mem_mib: t.memory_mib,
                    ..Shape::default()
                }),
                _ => {}
            }
        }
    }
    shapes
}
