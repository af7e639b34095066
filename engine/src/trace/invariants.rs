//! The promises the readers make on success, written down once for the
//! unit tests, the shared-data test and the fuzz targets (which include
//! this file by path: it needs only `Node` and `Pod` in its parent).

use super::{Node, Pod};

/// The first way `pods` breaks the promises of `parse_pods`, if any.
pub fn pods_invariant(pods: &[Pod]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut prev_line = 1; // the header
    for (i, p) in pods.iter().enumerate() {
        let at = || format!("pod {i} ({:?}, line {})", p.name, p.line);
        let fault = if p.name.is_empty() {
            Some("empty name".to_string())
        } else if seen.contains(&p.name) {
            Some("duplicate name".to_string())
        } else if p.line <= prev_line {
            Some(format!("line not after the previous row's {prev_line}"))
        } else if p.cpu_milli < 0 || p.memory_mib < 0 {
            Some("negative CPU or memory".to_string())
        } else if !(0..=1000).contains(&p.gpu_milli) {
            Some(format!("gpu_milli {} outside 0..1000", p.gpu_milli))
        } else if p.num_gpu == 0 && p.gpu_milli != 0 {
            Some("GPU share without GPUs".to_string())
        } else if p.num_gpu >= 1 && p.gpu_milli == 0 {
            Some("GPUs with a zero share".to_string())
        } else if p.num_gpu > 1 && p.gpu_milli != 1000 {
            Some("multi-GPU pod with a partial share".to_string())
        } else {
            spec_invariant(p).and_then(|()| times_invariant(p)).err()
        };
        if let Some(fault) = fault {
            return Err(format!("{}: {fault}", at()));
        }
        seen.insert(p.name.clone());
        prev_line = p.line;
    }
    Ok(())
}

fn spec_invariant(p: &Pod) -> Result<(), String> {
    let no_spec = p.gpu_spec_raw.is_empty() || p.gpu_spec_raw.eq_ignore_ascii_case("nan");
    if no_spec != p.gpu_spec.is_empty() {
        return Err(format!(
            "gpu_spec {:?} does not match raw {:?}",
            p.gpu_spec, p.gpu_spec_raw
        ));
    }
    if no_spec {
        return Ok(());
    }
    // The parsed list is the raw list with later repeats removed.
    let mut want: Vec<&str> = Vec::new();
    for m in p.gpu_spec_raw.split('|') {
        if !want.contains(&m) {
            want.push(m);
        }
    }
    if p.gpu_spec != want {
        return Err(format!(
            "gpu_spec {:?}, want {want:?} from raw {:?}",
            p.gpu_spec, p.gpu_spec_raw
        ));
    }
    for m in &p.gpu_spec {
        if m.is_empty() || m.eq_ignore_ascii_case("nan") || m.contains('|') {
            return Err(format!("gpu_spec has bad model {m:?}"));
        }
    }
    Ok(())
}

fn times_invariant(p: &Pod) -> Result<(), String> {
    for t in [p.creation_time, p.deletion_time, p.scheduled_time] {
        if t.is_some_and(|t| t < 0) {
            return Err(format!("negative time {t:?}"));
        }
    }
    Ok(())
}

/// `pods_invariant` for `parse_nodes`.
pub fn nodes_invariant(nodes: &[Node]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut prev_line = 1;
    for (i, n) in nodes.iter().enumerate() {
        let fault = if n.name.is_empty() {
            Some("empty name".to_string())
        } else if seen.contains(&n.name) {
            Some("duplicate name".to_string())
        } else if n.line <= prev_line {
            Some(format!("line not after the previous row's {prev_line}"))
        } else if n.cpu_milli < 0 || n.memory_mib < 0 {
            Some("negative capacity".to_string())
        } else if n.gpus > 0 && (n.model.is_empty() || n.model.eq_ignore_ascii_case("nan")) {
            Some("GPUs without a model".to_string())
        } else if n.gpus == 0 && !n.model.is_empty() {
            Some(format!("model {:?} without GPUs", n.model))
        } else if n.model.contains('|') {
            Some(format!("model {:?} is a list", n.model))
        } else {
            None
        };
        if let Some(fault) = fault {
            return Err(format!("node {i} ({:?}, line {}): {fault}", n.name, n.line));
        }
        seen.insert(n.name.clone());
        prev_line = n.line;
    }
    Ok(())
}
