use crate::cluster::State;
use crate::gpu::Model;
use crate::workload::Capacity;

/// Summarises what a cluster could ever offer one task, so that work that
/// can never run is refused up front (`Task::validate`).
///
/// The Go build counts a node's GPUs per model in a map and walks it, so
/// on a node with GPUs of several models the order of the models in
/// `mig_profiles` follows map order there; here it is the order in which
/// the models first appear on the node (every node of the known traces has
/// one model, where the two agree).
pub fn capacity_of(st: &State) -> Capacity {
    let mut c = Capacity::default();
    let mut count: Vec<(&Model, i32)> = Vec::new();
    for n in st.nodes() {
        c.max_cpu_milli = c.max_cpu_milli.max(n.cpu_milli());
        c.max_memory_mib = c.max_memory_mib.max(n.memory_mib());
        count.clear();
        for g in n.gpus() {
            // Models are compared by identity, as the Go build's map keyed
            // by *gpu.Model does.
            match count.iter_mut().find(|(m, _)| std::ptr::eq(*m, g.model())) {
                Some((_, k)) => *k += 1,
                None => count.push((g.model(), 1)),
            }
        }
        for &(m, k) in &count {
            let most = c.max_gpus.entry(m.name.clone()).or_insert(0);
            *most = (*most).max(k);
            c.gpu_memory_mib.insert(m.name.clone(), m.memory_mib);
            for p in &m.profiles {
                let models = c.mig_profiles.entry(p.name.to_string()).or_default();
                if !models.contains(&m.name) {
                    models.push(m.name.clone());
                }
            }
        }
    }
    c
}
