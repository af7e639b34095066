use crate::placement::Policy;
use crate::quote::quote;

use super::{
    Config, best_fit, dot_product, fgd, gpu_clustering, gpu_packing, k8s_default, partita, random,
};

/// The policies `new` knows, sorted by name (the Go build's `Names`).
const NAMES: [&str; 8] = [
    "best-fit",
    "dot-product",
    "fgd",
    "gpu-clustering",
    "gpu-packing",
    "k8s-default",
    "partita",
    "random",
];

/// Why a policy could not be built. The texts are the Go build's, which
/// the command line prints.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// No policy has the name.
    #[error("unknown policy {} (known: {})", quote(.0), NAMES.join(", "))]
    Unknown(String),
    /// dot-product and best-fit scale by the largest node.
    #[error("policy {0}: needs NormCPU and NormGPU (policies.ConfigFor sets them)")]
    NeedsNorms(&'static str),
    #[error("policy fgd: needs the typical workload (Config.Typical)")]
    FgdNeedsTypical,
    #[error("policy partita: needs the expected workload (Config.Typical and Config.Shapes)")]
    PartitaNeedsWorkload,
}

/// The names of the policies `new` builds, sorted.
pub fn names() -> &'static [&'static str] {
    &NAMES
}

/// Builds the named policy.
pub fn new(name: &str, c: Config) -> Result<Policy, PolicyError> {
    match name {
        "best-fit" => best_fit(&c),
        "dot-product" => dot_product(&c),
        "fgd" => fgd(&c),
        "gpu-clustering" => Ok(gpu_clustering()),
        "gpu-packing" => Ok(gpu_packing()),
        "k8s-default" => Ok(k8s_default()),
        "partita" => partita(&c),
        "random" => Ok(random()),
        _ => Err(PolicyError::Unknown(name.to_string())),
    }
}

pub(super) fn need_norms(name: &'static str, c: &Config) -> Result<(), PolicyError> {
    if c.norm_cpu <= 0 || c.norm_gpu <= 0 {
        return Err(PolicyError::NeedsNorms(name));
    }
    Ok(())
}
