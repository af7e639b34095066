//! Partita's layouts in the GPU Operator's mig-parted config (port of the
//! pure part of go/internal/kube/migconfig.go that node translation needs:
//! the per-GPU configs, their content-addressed names, mig-parted entries
//! and the packing of instance counts into start slices; the YAML file
//! itself, ParseMIGParted and Render, is not ported yet).
//!
//! The NVIDIA GPU Operator's MIG manager applies a named layout from a
//! mig-parted config file, chosen per node by the label nvidia.com/mig.config.
//! Partita writes its layouts into that file (a ConfigMap, see
//! docs/kubernetes.md) under content-addressed names, one entry per set of
//! GPUs of a node that share a layout:
//!
//! ```yaml
//! version: v1
//! mig-configs:
//!   all-disabled:
//!     - devices: all
//!       mig-enabled: false
//!   partita-b1556776c7:
//!     - devices: [0, 1, 2, 3]
//!       mig-enabled: false
//!     - devices: [4, 5, 6, 7]
//!       mig-enabled: true
//!       mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
//! ```
//!
//! mig-parted places instances itself: the config holds counts per profile,
//! not start slices. Partita's own bookkeeping of start slices is derived
//! from the counts (`pack_layouts`), so it is the same before and after a
//! restart.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;

use partita_engine::gpu::{GpuError, Layout, Model, Profile};
use sha2::{Digest, Sha256};

/// Instances per MIG profile name. A BTreeMap, so iteration is in sorted
/// order wherever Go sorts the keys.
pub type Counts = BTreeMap<String, i64>;

/// One entry of a named config: a set of GPUs and what they become.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigDeviceSpec {
    /// "all" or a list of GPU indices.
    pub devices: Devices,
    pub mig_enabled: bool,
    /// Empty when MIG is off.
    pub mig_devices: Counts,
}

/// mig-parted's device selector: all GPUs, or the listed ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Devices {
    #[default]
    All,
    Indices(Vec<usize>),
}

/// What one GPU should be: MIG off, or MIG on with these instances.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuConfig {
    pub mig: bool,
    pub counts: Counts,
}

impl GpuConfig {
    /// The configuration as text, zero counts left out, so equal
    /// configurations have equal keys.
    fn key(&self) -> String {
        if !self.mig {
            return "off".to_string();
        }
        let mut b = String::from("on");
        for (n, c) in &self.counts {
            if *c > 0 {
                let _ = write!(b, ",{n}={c}");
            }
        }
        b
    }
}

/// Why a config or a set of counts cannot be turned into layouts; the texts
/// are the Go build's.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MigConfigError {
    #[error("device {device}: the node has {gpus} GPUs")]
    DeviceOutOfRange { device: usize, gpus: usize },
    #[error("mig profile {profile}: count {count} is negative")]
    NegativeCount { profile: String, count: i64 },
    #[error(transparent)]
    Profile(#[from] GpuError),
    #[error("{instances} MIG instances but no MIG GPU to hold them")]
    NoMigGpu { instances: usize },
    #[error("{model}: {counts} do not fit on {gpus} MIG GPUs")]
    DoNotFit {
        model: String,
        /// `describe_counts` of the counts asked for.
        counts: String,
        gpus: usize,
    },
}

/// A layout as counts per profile.
pub fn counts_of(l: &Layout) -> Counts {
    let mut c = Counts::new();
    for p in l.iter() {
        *c.entry(p.profile.to_string()).or_insert(0) += 1;
    }
    c
}

/// Names a node's per-GPU configuration by its content, so nodes with the
/// same layouts share one entry and a name never changes meaning. The
/// "partita-" prefix is what the config's garbage collector relies on.
pub fn config_name(gpus: &[GpuConfig]) -> String {
    let mut h = Sha256::new();
    for (i, g) in gpus.iter().enumerate() {
        h.update(format!("{i}:{};", g.key()).as_bytes());
    }
    let mut name = String::from("partita-");
    // Ten hex digits: the first five bytes.
    for b in h.finalize().iter().take(5) {
        let _ = write!(name, "{b:02x}");
    }
    name
}

/// Per-GPU configs as mig-parted entries, grouping GPUs that share a
/// configuration, in order of their first GPU. A single group is written
/// as "all".
pub fn device_specs(gpus: &[GpuConfig]) -> Vec<MigDeviceSpec> {
    let mut out: Vec<MigDeviceSpec> = Vec::new();
    let mut at: HashMap<String, usize> = HashMap::new();
    for (i, g) in gpus.iter().enumerate() {
        let k = g.key();
        if let Some(&j) = at.get(&k) {
            if let Devices::Indices(idx) = &mut out[j].devices {
                idx.push(i);
            }
            continue;
        }
        at.insert(k, out.len());
        let mig_devices = if g.mig {
            g.counts
                .iter()
                .filter(|(_, c)| **c > 0)
                .map(|(n, c)| (n.clone(), *c))
                .collect()
        } else {
            Counts::new()
        };
        out.push(MigDeviceSpec {
            devices: Devices::Indices(vec![i]),
            mig_enabled: g.mig,
            mig_devices,
        });
    }
    if out.len() == 1 && !gpus.is_empty() {
        out[0].devices = Devices::All;
    }
    out
}

/// The entries of a named config as per-GPU configs for a node with `n`
/// GPUs. A GPU no entry names keeps its `false` in the second list.
pub fn expand_specs(
    specs: &[MigDeviceSpec],
    n: usize,
) -> Result<(Vec<GpuConfig>, Vec<bool>), MigConfigError> {
    let mut gpus = vec![GpuConfig::default(); n];
    let mut named = vec![false; n];
    for s in specs {
        let idx: Vec<usize> = match &s.devices {
            Devices::All => (0..n).collect(),
            Devices::Indices(idx) => idx.clone(),
        };
        for i in idx {
            if i >= n {
                return Err(MigConfigError::DeviceOutOfRange { device: i, gpus: n });
            }
            gpus[i] = GpuConfig {
                mig: s.mig_enabled,
                counts: s.mig_devices.clone(),
            };
            named[i] = true;
        }
    }
    Ok((gpus, named))
}

/// Bounds the search of `pack_layouts`; real inputs (at most 8 GPUs of 7
/// instances) take a few dozen steps.
const MAX_PACK_STEPS: usize = 200_000;

/// Places counts of MIG instances (per profile, over the whole set) onto
/// `gpus` GPUs of model `m`, and returns a valid layout per GPU. It is
/// deterministic: the largest instances first, each on the first GPU and
/// the first start where the rest can still be placed. Partita uses it to
/// turn the device plugin's per-profile capacity, or a mig-parted entry,
/// into start slices for its bookkeeping.
pub fn pack_layouts(
    m: &Model,
    counts: &Counts,
    gpus: usize,
) -> Result<Vec<Layout>, MigConfigError> {
    let mut items: Vec<&Profile> = Vec::new();
    for (name, &count) in counts {
        if count < 0 {
            return Err(MigConfigError::NegativeCount {
                profile: name.clone(),
                count,
            });
        }
        if count == 0 {
            continue;
        }
        let p = m.profile(name)?;
        for _ in 0..count {
            items.push(p);
        }
    }
    let mut layouts = vec![Layout::new(); gpus];
    if items.is_empty() {
        return Ok(layouts);
    }
    if gpus == 0 {
        return Err(MigConfigError::NoMigGpu {
            instances: items.len(),
        });
    }
    // Largest memory first, then largest compute; stable, so equal
    // profiles keep the sorted-name order.
    items.sort_by(|a, b| b.memory.cmp(&a.memory).then(b.compute.cmp(&a.compute)));
    let mut steps = 0;
    if !place(m, &items, 0, &mut layouts, &mut steps) {
        return Err(MigConfigError::DoNotFit {
            model: m.name.clone(),
            counts: describe_counts(counts),
            gpus,
        });
    }
    for l in &mut layouts {
        l.sort_by_key(|p| p.start);
    }
    Ok(layouts)
}

/// Places items[k..] onto the layouts, depth first; false when they do not
/// fit or the search ran out of steps.
fn place(
    m: &Model,
    items: &[&Profile],
    k: usize,
    layouts: &mut [Layout],
    steps: &mut usize,
) -> bool {
    if k == items.len() {
        return true;
    }
    *steps += 1;
    if *steps > MAX_PACK_STEPS {
        return false;
    }
    let mut tried: HashSet<String> = HashSet::new();
    for g in 0..layouts.len() {
        // GPUs with the same layout are interchangeable: try one.
        if !tried.insert(layouts[g].to_string()) {
            continue;
        }
        let Ok(places) = m.free_placements(&layouts[g], &items[k].name) else {
            return false;
        };
        for pl in places {
            layouts[g].push(pl);
            if place(m, items, k + 1, layouts, steps) {
                return true;
            }
            layouts[g].pop();
        }
    }
    false
}

/// "2×1g.10gb + 1×3g.40gb", zero counts left out.
fn describe_counts(counts: &Counts) -> String {
    let parts: Vec<String> = counts
        .iter()
        .filter(|(_, c)| **c > 0)
        .map(|(n, c)| format!("{c}×{n}"))
        .collect();
    if parts.is_empty() {
        return "no instances".to_string();
    }
    parts.join(" + ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use partita_engine::gpu::lookup;

    pub(crate) fn counts(pairs: &[(&str, i64)]) -> Counts {
        pairs.iter().map(|(n, c)| (n.to_string(), *c)).collect()
    }

    fn on(pairs: &[(&str, i64)]) -> GpuConfig {
        GpuConfig {
            mig: true,
            counts: counts(pairs),
        }
    }

    // TestMIGPartedRoundTrip, without the YAML (not ported yet): the
    // entries of a node's configs expand back to the same configs and name.
    #[test]
    fn device_specs_expand_back() {
        let balanced = [("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)];
        let gpus = vec![
            GpuConfig::default(),
            GpuConfig::default(),
            on(&balanced),
            on(&balanced),
        ];
        let specs = device_specs(&gpus);
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].devices, Devices::Indices(vec![0, 1]));
        assert_eq!(specs[1].devices, Devices::Indices(vec![2, 3]));
        assert!(specs[1].mig_enabled);
        assert_eq!(specs[1].mig_devices, counts(&balanced));
        let (got, named) = expand_specs(&specs, 4).unwrap();
        for i in 0..gpus.len() {
            assert!(named[i], "GPU {i} not named");
            assert_eq!(got[i].key(), gpus[i].key(), "GPU {i}");
        }
        assert_eq!(config_name(&got), config_name(&gpus));
    }

    // TestConfigNameIsContentAddressed.
    #[test]
    fn config_name_is_content_addressed() {
        let a = [on(&[("1g.10gb", 7)])];
        let b = [on(&[("1g.10gb", 7), ("2g.20gb", 0)])];
        let c = [on(&[("1g.10gb", 6)])];
        assert_eq!(
            config_name(&a),
            config_name(&b),
            "zero counts change the name"
        );
        assert_ne!(
            config_name(&a),
            config_name(&c),
            "different layouts share a name"
        );
        assert!(
            config_name(&a).starts_with("partita-"),
            "name lacks the partita- prefix the garbage collector relies on"
        );
        assert_eq!(config_name(&a).len(), "partita-".len() + 10);
    }

    // The name is the Go build's for the same content: the first ten hex
    // digits of the sha256 of "<gpu>:<key>;" per GPU (from sha256sum of
    // printf '0:on,1g.10gb=7;' and '0:off;1:on,2g.20gb=2,3g.40gb=1;').
    #[test]
    fn config_name_matches_go() {
        assert_eq!(config_name(&[on(&[("1g.10gb", 7)])]), "partita-4a7a377c0e");
        let gpus = [GpuConfig::default(), on(&[("3g.40gb", 1), ("2g.20gb", 2)])];
        assert_eq!(config_name(&gpus), "partita-1a290cb11b");
    }

    // TestDeviceSpecsOneGroupIsAll.
    #[test]
    fn device_specs_one_group_is_all() {
        let specs = device_specs(&[GpuConfig::default(), GpuConfig::default()]);
        let want = vec![MigDeviceSpec {
            devices: Devices::All,
            mig_enabled: false,
            mig_devices: Counts::new(),
        }];
        assert_eq!(specs, want);
    }

    // The ExpandSpecs part of TestParseMIGPartedErrors.
    #[test]
    fn expand_specs_refuses_a_missing_gpu() {
        let specs = [MigDeviceSpec {
            devices: Devices::Indices(vec![8]),
            ..MigDeviceSpec::default()
        }];
        let err = expand_specs(&specs, 8).unwrap_err();
        assert_eq!(err.to_string(), "device 8: the node has 8 GPUs");
    }

    // TestPackLayouts (it is in node_test.go in the Go build).
    #[test]
    fn pack_layouts_cases() {
        let h100 = lookup("H100-80GB");
        // (name, counts, GPUs, whether they fit)
        type PackCase = (&'static str, &'static [(&'static str, i64)], usize, bool);
        let cases: &[PackCase] = &[
            (
                "all-balanced on one GPU",
                &[("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)],
                1,
                true,
            ),
            (
                "4g and 3g share a GPU",
                &[("4g.40gb", 1), ("3g.40gb", 1)],
                1,
                true,
            ),
            ("seven 1g", &[("1g.10gb", 7)], 1, true),
            ("eight 1g need two GPUs", &[("1g.10gb", 8)], 1, false),
            ("eight 1g on two GPUs", &[("1g.10gb", 8)], 2, true),
            ("two 4g need two GPUs", &[("4g.40gb", 2)], 2, true),
            ("two +me on one GPU", &[("1g.10gb+me", 2)], 1, false),
            ("unknown profile", &[("5g.99gb", 1)], 1, false),
            ("nothing", &[], 3, true),
        ];
        for (name, want, gpus, ok) in cases {
            let want = counts(want);
            let got = pack_layouts(&h100, &want, *gpus);
            assert_eq!(got.is_ok(), *ok, "{name}: {got:?}");
            let Ok(layouts) = got else { continue };
            assert_eq!(layouts.len(), *gpus, "{name}");
            let mut total = Counts::new();
            for l in &layouts {
                h100.validate(l)
                    .unwrap_or_else(|e| panic!("{name}: layout {l}: {e}"));
                for (p, c) in counts_of(l) {
                    *total.entry(p).or_insert(0) += c;
                }
            }
            assert_eq!(total, want, "{name}: placed");
        }
    }

    // The error texts name what does not fit, as Go's do.
    #[test]
    fn pack_layouts_messages() {
        let h100 = lookup("H100-80GB");
        let err = pack_layouts(&h100, &counts(&[("1g.10gb", 8)]), 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "H100-80GB: 8×1g.10gb do not fit on 1 MIG GPUs"
        );
        let err = pack_layouts(&h100, &counts(&[("1g.10gb", 1)]), 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "1 MIG instances but no MIG GPU to hold them"
        );
        let err = pack_layouts(&h100, &counts(&[("1g.10gb", -1)]), 1).unwrap_err();
        assert_eq!(err.to_string(), "mig profile 1g.10gb: count -1 is negative");
    }
}
