use std::sync::Arc;

use super::{
    AllocError, Assignment, ClusterError, Gpu, Grant, GrantError, Hold, Node, Slice, State,
};
use crate::gpu::{COMPUTE_SLICES, Layout, Placement};

impl State {
    /// Gives a task what the assignment names. Everything is checked
    /// before anything changes: on error the State is as it was, and no
    /// node has been copied.
    pub fn allocate(&mut self, a: &Assignment) -> Result<(), ClusterError> {
        let Some(i) = self.lookup(&a.node) else {
            return Err(ClusterError::AllocateUnknownNode {
                task: a.task.clone(),
                node: a.node.clone(),
            });
        };
        check(self.node(i), a).map_err(|reason| ClusterError::Refused {
            task: a.task.clone(),
            node: a.node.clone(),
            reason: Box::new(reason),
        })?;
        let n = self.mutable(i);
        n.cpu_used += a.cpu_milli;
        n.mem_used += a.memory_mib;
        let task: Arc<str> = Arc::from(a.task.as_str());
        for g in &a.grants {
            // `check` made sure the index is one of the node's GPUs.
            let d = &mut n.gpus[g.gpu as usize];
            let Some(slice) = &g.slice else {
                d.used += g.milli;
                d.holders.push(Hold {
                    task: task.clone(),
                    milli: g.milli,
                });
                continue;
            };
            if let Some(k) = d.slice_at(slice) {
                d.slices[k].task = Some(task.clone());
                continue;
            }
            let placement = own_name(d, slice);
            d.slices.push(Slice {
                placement,
                task: Some(task.clone()),
            });
            d.recount();
        }
        // The State keeps its own copy: the caller may reuse its grants.
        n.tasks.push(Arc::new(a.clone()));
        Ok(())
    }

    /// Frees what a task holds on a node and returns its assignment. MIG
    /// instances stay in place, free, as they do on a real GPU.
    pub fn release(&mut self, node: &str, task: &str) -> Result<Assignment, ClusterError> {
        let Some(i) = self.lookup(node) else {
            return Err(ClusterError::ReleaseUnknownNode {
                task: task.to_string(),
                node: node.to_string(),
            });
        };
        let Some(k) = self.node(i).tasks.iter().position(|a| a.task == task) else {
            return Err(ClusterError::UnknownTask {
                task: task.to_string(),
                node: node.to_string(),
            });
        };
        let n = self.mutable(i);
        let a = n.tasks.remove(k);
        n.cpu_used -= a.cpu_milli;
        n.mem_used -= a.memory_mib;
        for g in &a.grants {
            let d = &mut n.gpus[g.gpu as usize];
            match &g.slice {
                None => {
                    d.used -= g.milli;
                    if let Some(j) = d.holders.iter().position(|h| &*h.task == task) {
                        d.holders.remove(j);
                    }
                }
                Some(slice) => {
                    if let Some(j) = d.slice_at(slice) {
                        d.slices[j].task = None;
                    }
                }
            }
        }
        Ok(Arc::unwrap_or_clone(a))
    }

    /// Replaces a MIG GPU's free instances with `layout`. Instances in use
    /// must appear in `layout` at the same place: reconfiguring never
    /// touches running work.
    pub fn set_layout(
        &mut self,
        node: &str,
        index: usize,
        layout: &[Placement],
    ) -> Result<(), ClusterError> {
        let i = self.find(node)?;
        let d = gpu_of(self.node(i), index)?;
        if !d.mig {
            return Err(ClusterError::MigOff {
                node: node.to_string(),
                index,
            });
        }
        d.model
            .validate(layout)
            .map_err(|source| ClusterError::BadLayout {
                node: node.to_string(),
                index,
                source: Box::new(source),
            })?;
        let mut next: Vec<Slice> = layout
            .iter()
            .map(|p| Slice {
                placement: own_name(d, p),
                task: None,
            })
            .collect();
        for old in &d.slices {
            let Some(task) = &old.task else {
                continue;
            };
            let Some(k) = layout.iter().position(|p| *p == old.placement) else {
                return Err(ClusterError::DropsHeld {
                    node: node.to_string(),
                    index,
                    placement: old.placement.clone(),
                    task: task.to_string(),
                });
            };
            next[k].task = Some(task.clone());
        }
        let d = &mut self.mutable(i).gpus[index];
        d.slices = next;
        d.recount();
        Ok(())
    }

    /// Turns MIG mode on or off. Like the real switch, it needs the GPU
    /// idle; it drops any instances.
    pub fn set_mig(&mut self, node: &str, index: usize, on: bool) -> Result<(), ClusterError> {
        let i = self.find(node)?;
        let d = gpu_of(self.node(i), index)?;
        if on && !d.model.mig {
            return Err(ClusterError::GpuWithoutMig {
                node: node.to_string(),
                index,
                model: d.model.name.clone(),
            });
        }
        if !d.idle() {
            return Err(ClusterError::Busy {
                node: node.to_string(),
                index,
            });
        }
        let d = &mut self.mutable(i).gpus[index];
        d.mig = on;
        d.slices = Vec::new();
        d.recount();
        Ok(())
    }

    /// Re-partitions a GPU as a scheduler's MIG change asks: MIG off
    /// (`mig` false), or on with `layout`, turning MIG on first when it is
    /// off. What the world does meanwhile (cordon the GPU, time the change)
    /// is the world's.
    pub fn repartition(
        &mut self,
        node: &str,
        index: usize,
        mig: bool,
        layout: &[Placement],
    ) -> Result<(), ClusterError> {
        let i = self.find(node)?;
        let was_mig = gpu_of(self.node(i), index)?.mig;
        if !mig {
            return self.set_mig(node, index, false);
        }
        if !was_mig {
            self.set_mig(node, index, true)?;
        }
        self.set_layout(node, index, layout)
    }

    /// Stops (or, with `on` false, resumes) new work on a GPU. Running
    /// work is untouched.
    pub fn cordon(&mut self, node: &str, index: usize, on: bool) -> Result<(), ClusterError> {
        let i = self.find(node)?;
        gpu_of(self.node(i), index)?;
        self.mutable(i).gpus[index].cordoned = on;
        Ok(())
    }
}

fn gpu_of(n: &Node, index: usize) -> Result<&Gpu, ClusterError> {
    n.gpus.get(index).ok_or_else(|| ClusterError::NoSuchGpu {
        node: n.name().to_string(),
        index,
    })
}

/// `p` with the profile name the GPU's model spells it with: a catalog
/// model's names are `'static`, so copies of the node copy no string.
fn own_name(d: &Gpu, p: &Placement) -> Placement {
    match d.model.find(&p.profile) {
        Some(profile) => Placement {
            profile: profile.name.clone(),
            start: p.start,
        },
        None => p.clone(),
    }
}

/// Why an assignment does not fit a node, or nothing.
fn check(n: &Node, a: &Assignment) -> Result<(), AllocError> {
    if a.task.is_empty() {
        return Err(AllocError::EmptyTaskName);
    }
    if n.task(&a.task).is_some() {
        return Err(AllocError::AlreadyRuns);
    }
    if a.cpu_milli < 0 || a.memory_mib < 0 {
        return Err(AllocError::Negative);
    }
    if a.cpu_milli > n.cpu_free() {
        return Err(AllocError::Cpu {
            asks: a.cpu_milli,
            free: n.cpu_free(),
            total: n.cpu_milli(),
        });
    }
    if a.memory_mib > n.mem_free() {
        return Err(AllocError::Memory {
            asks: a.memory_mib,
            free: n.mem_free(),
            total: n.memory_mib(),
        });
    }
    for (j, g) in a.grants.iter().enumerate() {
        let Some(d) = usize::try_from(g.gpu).ok().and_then(|i| n.gpus.get(i)) else {
            return Err(AllocError::NoSuchGpu {
                gpu: g.gpu,
                count: n.gpus.len(),
            });
        };
        if a.grants[..j].iter().any(|h| h.gpu == g.gpu) {
            return Err(AllocError::GrantedTwice { gpu: g.gpu });
        }
        check_grant(d, g).map_err(|reason| AllocError::Grant { gpu: g.gpu, reason })?;
    }
    Ok(())
}

fn check_grant(d: &Gpu, g: &Grant) -> Result<(), GrantError> {
    if d.cordoned {
        return Err(GrantError::Cordoned);
    }
    let Some(slice) = &g.slice else {
        if d.mig {
            return Err(GrantError::MigOn(g.milli));
        }
        if !(1..=1000).contains(&g.milli) {
            return Err(GrantError::BadShare(g.milli));
        }
        if g.milli > d.free() {
            return Err(GrantError::TooMuch {
                asks: g.milli,
                free: d.free(),
            });
        }
        return Ok(());
    };
    if !d.mig {
        return Err(GrantError::MigOff(slice.clone()));
    }
    if let Some(k) = d.slice_at(slice) {
        return match &d.slices[k].task {
            Some(task) => Err(GrantError::Held {
                placement: slice.clone(),
                task: task.to_string(),
            }),
            None => Ok(()),
        };
    }
    let p = d
        .model
        .profile(&slice.profile)
        .map_err(GrantError::Layout)?;
    if !p.can_start(slice.start) {
        return Err(GrantError::StartNotAllowed {
            placement: slice.clone(),
            allowed: format!("[{}]", crate::gpu::join_starts(&p.starts, " ")),
        });
    }
    if p.mask(slice.start) & d.mem_mask != 0 || i32::from(d.compute) + p.compute > COMPUTE_SLICES {
        return Err(GrantError::NoRoom {
            placement: slice.clone(),
            layout: d.layout().to_string(),
        });
    }
    // Per-profile limits and the single +me are rules the geometry above
    // does not cover; validate knows them all. (Only on the way to
    // creating an instance: the list is short.)
    let mut grown: Layout = d.layout();
    grown.push(slice.clone());
    d.model.validate(&grown).map_err(GrantError::Layout)
}
