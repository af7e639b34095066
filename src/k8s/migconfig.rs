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
use partita_engine::quote::quote;
use sha2::{Digest, Sha256};

/// Instances per MIG profile name. A BTreeMap, so iteration is in sorted
/// order wherever Go sorts the keys.
pub type Counts = BTreeMap<String, i64>;

/// One entry of a named config: a set of GPUs and what they become.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigDeviceSpec {
    /// Limits the entry to GPUs of the listed PCI device IDs
    /// ("0x20B210DE", or a list of them), as the GPU Operator's default
    /// config does for per-model entries. Partita's own entries have none;
    /// in entries it did not write it is kept, since Partita rewrites the
    /// whole file when it adds a layout.
    pub device_filter: Option<DeviceFilter>,
    /// "all" or a list of GPU indices.
    pub devices: Devices,
    pub mig_enabled: bool,
    /// Empty when MIG is off.
    pub mig_devices: Counts,
}

/// A device filter: one PCI device ID or a list of them. (The Go build
/// kept the YAML node as written; the stock configs write quoted strings,
/// which is what is read and written here.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceFilter {
    One(String),
    List(Vec<String>),
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
            device_filter: None,
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

/// The ConfigMap key the MIG manager reads.
pub const MIG_CONFIG_KEY: &str = "config.yaml";

/// A mig-parted config file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigParted {
    pub version: String,
    /// Named configs, in name order (so the same content renders to the
    /// same bytes).
    pub mig_configs: BTreeMap<String, Vec<MigDeviceSpec>>,
}

/// Why a mig-parted config file cannot be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MigPartedError {
    #[error("mig-parted config: not UTF-8: {0}")]
    NotUtf8(String),
    #[error("mig-parted config: {0}")]
    Yaml(String),
    #[error("mig-parted config: version {}, want v1", quote(.0))]
    Version(String),
}

/// Reads a mig-parted config file.
pub fn parse_mig_parted(data: &[u8]) -> Result<MigParted, MigPartedError> {
    let text = std::str::from_utf8(data).map_err(|e| MigPartedError::NotUtf8(e.to_string()))?;
    let file: yaml_in::File = if text.trim().is_empty() {
        // An empty document is an empty file to Go's yaml, not an error.
        yaml_in::File::default()
    } else {
        serde_saphyr::from_str(text).map_err(|e| MigPartedError::Yaml(e.to_string()))?
    };
    let version = file.version.unwrap_or_default();
    if version != "v1" {
        return Err(MigPartedError::Version(version));
    }
    let mig_configs = file
        .mig_configs
        .unwrap_or_default()
        .into_iter()
        .map(|(name, specs)| {
            let specs = specs
                .unwrap_or_default()
                .into_iter()
                .map(|s| MigDeviceSpec {
                    device_filter: s.device_filter,
                    devices: s.devices.unwrap_or(Devices::Indices(Vec::new())),
                    mig_enabled: s.mig_enabled.unwrap_or(false),
                    mig_devices: s.mig_devices.unwrap_or_default(),
                })
                .collect();
            (name, specs)
        })
        .collect();
    Ok(MigParted {
        version,
        mig_configs,
    })
}

impl MigParted {
    /// The config as YAML, names in sorted order, laid out as the Go
    /// build's yaml.v3 writes it (four spaces an indent, device lists in
    /// flow style).
    pub fn render(&self) -> String {
        let mut out = format!("version: {}\n", yaml_scalar(&self.version));
        if self.mig_configs.is_empty() {
            out.push_str("mig-configs: {}\n");
            return out;
        }
        out.push_str("mig-configs:\n");
        for (name, specs) in &self.mig_configs {
            if specs.is_empty() {
                let _ = writeln!(out, "    {}: []", yaml_scalar(name));
                continue;
            }
            let _ = writeln!(out, "    {}:", yaml_scalar(name));
            for s in specs {
                // The first key follows the dash; the others line up.
                let mut lead = "        - ";
                let mut line = |text: String, out: &mut String| {
                    let _ = writeln!(out, "{lead}{text}");
                    lead = "          ";
                };
                match &s.device_filter {
                    None => {}
                    Some(DeviceFilter::One(id)) => {
                        line(format!("device-filter: {}", double_quoted(id)), &mut out)
                    }
                    Some(DeviceFilter::List(ids)) => {
                        let ids: Vec<String> = ids.iter().map(|i| double_quoted(i)).collect();
                        line(format!("device-filter: [{}]", ids.join(", ")), &mut out)
                    }
                }
                let devices = match &s.devices {
                    Devices::All => "all".to_string(),
                    Devices::Indices(idx) => {
                        let idx: Vec<String> = idx.iter().map(usize::to_string).collect();
                        format!("[{}]", idx.join(", "))
                    }
                };
                line(format!("devices: {devices}"), &mut out);
                line(format!("mig-enabled: {}", s.mig_enabled), &mut out);
                if !s.mig_devices.is_empty() {
                    line("mig-devices:".to_string(), &mut out);
                    for (profile, count) in &s.mig_devices {
                        let _ = writeln!(out, "              {}: {count}", yaml_scalar(profile));
                    }
                }
            }
        }
        out
    }
}

/// A string as a YAML scalar: plain where no YAML reader could take it
/// for anything but that string, else double-quoted.
fn yaml_scalar(s: &str) -> String {
    let plain_chars = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'));
    let first_ok = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
    // Words YAML 1.1 or 1.2 read as booleans or null, and anything that
    // reads as a number (1e5, 0x1F, 0o7, 1_000 is kept out by the
    // character set).
    let special = [
        "true", "false", "yes", "no", "on", "off", "y", "n", "null", "nan", "inf",
    ]
    .contains(&s.to_ascii_lowercase().as_str());
    let numeric = s.parse::<f64>().is_ok()
        || ["0x", "0o", "0b", "0X", "0O", "0B"]
            .iter()
            .any(|p| s.starts_with(p));
    if plain_chars && first_ok && !special && !numeric {
        s.to_string()
    } else {
        double_quoted(s)
    }
}

/// A double-quoted YAML scalar: JSON's string escapes are YAML's.
fn double_quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// The file as serde reads it: every field optional, the checks Go's
/// UnmarshalYAML makes in the `Deserialize` impls of `Devices` and
/// `DeviceFilter`. Unknown keys are ignored, as by Go's yaml.
mod yaml_in {
    use super::{Counts, DeviceFilter, Devices};
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Deserialize, Default)]
    pub(super) struct File {
        #[serde(default)]
        pub version: Option<String>,
        #[serde(rename = "mig-configs", default)]
        pub mig_configs: Option<BTreeMap<String, Option<Vec<Spec>>>>,
    }

    #[derive(Deserialize)]
    pub(super) struct Spec {
        #[serde(rename = "device-filter", default)]
        pub device_filter: Option<DeviceFilter>,
        #[serde(default)]
        pub devices: Option<Devices>,
        #[serde(rename = "mig-enabled", default)]
        pub mig_enabled: Option<bool>,
        #[serde(rename = "mig-devices", default)]
        pub mig_devices: Option<Counts>,
    }
}

impl<'de> serde::Deserialize<'de> for Devices {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Devices, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Devices;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("devices: \"all\" or a list of GPU indices")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Devices, E> {
                if v == "all" {
                    return Ok(Devices::All);
                }
                Err(E::custom(format!(
                    "devices: {}: want \"all\" or a list of GPU indices",
                    quote(v)
                )))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Devices, A::Error> {
                let mut idx = Vec::new();
                while let Some(i) = seq.next_element::<i64>()? {
                    let Ok(i) = usize::try_from(i) else {
                        return Err(serde::de::Error::custom(format!(
                            "devices: GPU index {i} is negative"
                        )));
                    };
                    idx.push(i);
                }
                Ok(Devices::Indices(idx))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> serde::Deserialize<'de> for DeviceFilter {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<DeviceFilter, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = DeviceFilter;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "device-filter: a PCI device ID such as \"0x20B210DE\" or a list of them",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DeviceFilter, E> {
                Ok(DeviceFilter::One(v.to_string()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<DeviceFilter, A::Error> {
                let mut ids = Vec::new();
                while let Some(id) = seq.next_element::<String>()? {
                    ids.push(id);
                }
                Ok(DeviceFilter::List(ids))
            }
        }
        d.deserialize_any(V)
    }
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
            device_filter: None,
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
    // TestMIGPartedRoundTrip.
    #[test]
    fn mig_parted_round_trip() {
        let balanced = [("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)];
        let gpus = vec![
            GpuConfig::default(),
            GpuConfig::default(),
            on(&balanced),
            on(&balanced),
        ];
        let name = config_name(&gpus);
        let c = MigParted {
            version: "v1".into(),
            mig_configs: [
                (name.clone(), device_specs(&gpus)),
                ("all-disabled".to_string(), vec![MigDeviceSpec::default()]),
            ]
            .into(),
        };
        let text = c.render();
        for want in [
            "version: v1",
            "devices: [0, 1]",
            "devices: [2, 3]",
            "mig-enabled: true",
            "3g.40gb: 1",
            "devices: all",
        ] {
            assert!(
                text.contains(want),
                "rendered config lacks {want:?}:\n{text}"
            );
        }
        let back = parse_mig_parted(text.as_bytes()).unwrap();
        assert_eq!(back, c, "{text}");
        let (got, named) = expand_specs(&back.mig_configs[&name], 4).unwrap();
        for i in 0..gpus.len() {
            assert!(named[i], "GPU {i} not named");
            assert_eq!(got[i].key(), gpus[i].key(), "GPU {i}");
        }
        assert_eq!(config_name(&got), name);
    }

    // TestParseMIGPartedErrors: each refusal names what is wrong.
    #[test]
    fn parse_mig_parted_errors() {
        let cases = [
            ("version: v2\nmig-configs: {}\n", "version \"v2\", want v1"),
            (
                "version: v1\nmig-configs:\n  x:\n    - devices: some\n",
                "devices: \"some\": want \"all\" or a list of GPU indices",
            ),
            (
                "version: v1\nmig-configs:\n  x:\n    - devices: [-1]\n",
                "devices: GPU index -1 is negative",
            ),
            (": not yaml", "mig-parted config"),
            ("", "version \"\", want v1"),
            (
                "version: v1\nmig-configs:\n  x:\n    - mig-devices: {\"1g.10gb\": many}\n",
                "mig-parted config",
            ),
        ];
        for (text, want) in cases {
            match parse_mig_parted(text.as_bytes()) {
                Ok(c) => panic!("accepted {text:?} as {c:?}"),
                Err(e) => assert!(
                    e.to_string().contains(want),
                    "{text:?}: error {e} does not say {want:?}"
                ),
            }
        }
        let err = parse_mig_parted(b"version: v1\n\xff").unwrap_err();
        assert!(err.to_string().contains("not UTF-8"), "{err}");
    }

    // TestMIGPartedKeepsDeviceFilters: a config seeded from the GPU
    // Operator's default keeps its device filters when Partita adds a
    // layout, or every model's entry would apply to every GPU.
    #[test]
    fn mig_parted_keeps_device_filters() {
        let stock = r#"version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.10gb:
    - device-filter: ["0x20B010DE", "0x20B110DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 7
    - device-filter: "0x233010DE"
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
"#;
        let mut c = parse_mig_parted(stock.as_bytes()).unwrap();
        let gpus = [on(&[("3g.40gb", 2)])];
        c.mig_configs
            .insert(config_name(&gpus), device_specs(&gpus));
        let text = c.render();
        for want in [
            r#"device-filter: ["0x20B010DE", "0x20B110DE"]"#,
            r#"device-filter: "0x233010DE""#,
        ] {
            assert!(
                text.contains(want),
                "rewritten config lacks {want}:\n{text}"
            );
        }
        assert_eq!(
            text.matches("device-filter").count(),
            2,
            "none on Partita's entry:\n{text}"
        );
        let back = parse_mig_parted(text.as_bytes()).unwrap();
        assert_eq!(back.render(), text, "a second round trip changed the file");
    }

    // Names and profiles that YAML would read as something else are
    // quoted, and come back as written.
    #[test]
    fn render_quotes_what_yaml_would_misread() {
        let mut c = MigParted {
            version: "v1".into(),
            ..MigParted::default()
        };
        for name in ["yes", "1e5", "0x10", "a: b", "", "#x", "1g.10gb+me", "null"] {
            c.mig_configs.insert(
                name.to_string(),
                vec![MigDeviceSpec {
                    mig_enabled: true,
                    mig_devices: counts(&[(name, 1)]),
                    ..MigDeviceSpec::default()
                }],
            );
        }
        let text = c.render();
        assert_eq!(parse_mig_parted(text.as_bytes()).unwrap(), c, "{text}");
    }

    mod fuzz {
        use super::super::*;
        use proptest::prelude::*;

        /// Valid configs, text and structure both.
        fn config() -> impl Strategy<Value = MigParted> {
            let name = "[a-z0-9 .:#'\"+-]{0,12}";
            let counts = prop::collection::btree_map(name, -2i64..9, 0..4);
            let devices = prop_oneof![
                Just(Devices::All),
                prop::collection::vec(0usize..16, 0..5).prop_map(Devices::Indices),
            ];
            let filter = prop_oneof![
                Just(None),
                "0x[0-9A-F]{8}".prop_map(|s| Some(DeviceFilter::One(s))),
                prop::collection::vec("0x[0-9A-F]{8}", 0..3)
                    .prop_map(|v| Some(DeviceFilter::List(v))),
            ];
            let spec =
                (filter, devices, any::<bool>(), counts).prop_map(|(f, d, m, c)| MigDeviceSpec {
                    device_filter: f,
                    devices: d,
                    mig_enabled: m,
                    mig_devices: c,
                });
            prop::collection::btree_map(name, prop::collection::vec(spec, 0..3), 0..4).prop_map(
                |mig_configs| MigParted {
                    version: "v1".into(),
                    mig_configs,
                },
            )
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1000))]

            // FuzzParseMIGParted: random bytes never panic; what parses
            // renders to a file that parses to the same config.
            #[test]
            fn random_bytes_are_parsed_or_refused(data in prop::collection::vec(any::<u8>(), 0..200)) {
                if let Ok(c) = parse_mig_parted(&data) {
                    let text = c.render();
                    let back = parse_mig_parted(text.as_bytes());
                    let back = back.as_ref();
                    prop_assert_eq!(back, Ok(&c), "{}", text);
                }
            }

            // Random text in YAML's alphabet, nearer to real files.
            #[test]
            fn random_yaml_is_parsed_or_refused(text in "(version: v1\n)?(mig-configs:\n)?([ a-z0-9:\\-\\[\\]{},\"'#&*!|>.\n]{0,80})") {
                match parse_mig_parted(text.as_bytes()) {
                    Ok(c) => {
                        let out = c.render();
                        prop_assert_eq!(parse_mig_parted(out.as_bytes()), Ok(c.clone()), "{}", out);
                    }
                    Err(e) => prop_assert!(e.to_string().starts_with("mig-parted config: "), "{}", e),
                }
            }

            // Whatever Partita writes, it reads back the same.
            #[test]
            fn render_then_parse_is_identity(c in config()) {
                let text = c.render();
                prop_assert_eq!(parse_mig_parted(text.as_bytes()), Ok(c.clone()), "{}", text);
            }
        }
    }
}
